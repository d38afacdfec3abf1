// Package pubsub fans live leaderboard changes out to local subscribers: one Redis pub/sub subscription per
// process, one cached top list per watched board-window-period, each diff computed once and shared by every
// subscriber, bounded per-subscriber queues. It knows nothing of GraphQL.
package pubsub

import (
	"log/slog"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Config configures a Hub. Every field has a usable zero value.
type Config struct {
	// MaxUpdateRate is how many updates per second a subscriber gets at most for one board view; it is also how
	// often a view's cached top list is re-read from Redis at most. Default 10.
	MaxUpdateRate float64
	// QueueSize is how many updates may wait for a subscriber that has not read the previous ones. When the queue
	// is full, the waiting updates are merged into one diff (or replaced by a fresh snapshot). Default 1.
	QueueSize int
	// SnapshotAfter is how many list versions a subscriber may fall behind before it gets a fresh snapshot instead
	// of a merged diff. Default 8.
	SnapshotAfter int
	// StuckAfter is how long a subscriber may leave a full queue unread before it is dropped (its channel is
	// closed). Default 30 seconds.
	StuckAfter time.Duration
	// RankWatchTTL is the TTL of Store.WatchKey(board) while rank watchers exist; it is refreshed every third of
	// it. Default 60 seconds.
	RankWatchTTL time.Duration
	// CacheSize is how many board views Top keeps cached (and watched) without subscribers. Default 1000.
	CacheSize int
	// PeriodCheck is how often subscriptions that follow the current period check for a rollover. Default 1s.
	PeriodCheck time.Duration
	// Logger receives warnings (lost connections, dropped subscribers). Default slog.Default().
	Logger *slog.Logger
}

// TopUpdate is one message of a top-list subscription.
type TopUpdate struct {
	Board  string
	Window leaderboard.Window
	Period string
	// Version counts the updates of this subscription: 1 is the first snapshot, then +1 per update, no gaps.
	Version int64
	// Snapshot: Entries is the whole list. Otherwise Entries holds the rows that entered or changed rank or
	// score, and Removed the players who left the list.
	Snapshot bool
	Entries  []leaderboard.Entry
	Removed  []string
	// Size is the number of players in the window period when the list was read.
	Size int64
}
