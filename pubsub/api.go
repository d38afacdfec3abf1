// Package pubsub fans live leaderboard changes out to local subscribers.
//
// One Redis pub/sub connection per process (on Redis Cluster one per primary that serves a watched board's slot,
// each board's channel subscribed on its own: SSUBSCRIBE takes channels of one slot) carries the change events of
// every watched board. Per watched board a
// goroutine turns events into at most MaxUpdateRate Redis reads per second: per board-window-period one top list
// is read (as deep as its subscribers show, MaxFirst when Top serves it), each subscriber group (same `first`) gets one diff computed once and shared by all of its
// subscribers, and a subscriber that falls behind gets a merged diff or a snapshot instead of a growing queue.
// Nothing here ever blocks the goroutine that reads from Redis. It knows nothing of GraphQL.
package pubsub

import (
	"log/slog"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// MaxFirst is the longest top list a subscription may ask for and the longest list cached per view: the
// store's leaderboard.LiveTop, beyond which changes are not published.
const MaxFirst = leaderboard.LiveTop

// Config configures a Hub. Every field has a usable zero value.
type Config struct {
	// MaxUpdateRate is how many updates per second a subscriber gets at most for one board (per second); it is
	// also how often a board's cached lists are re-read from Redis at most. Default 10.
	MaxUpdateRate float64
	// QueueSize is how many updates may wait unread in a subscriber's channel. When it is full, the waiting
	// updates are taken back and replaced by one merged diff (or a fresh snapshot). Default 1.
	QueueSize int
	// SnapshotAfter is how many list versions a subscriber may fall behind and still get a merged diff; beyond
	// it, it gets a fresh snapshot. Default 8.
	SnapshotAfter int
	// StuckAfter is how long a subscriber may leave its channel full, reading nothing, before it is dropped (its
	// channel is closed). Default 30 seconds.
	StuckAfter time.Duration
	// RankReadBatch is how many watched players one Redis read of their ranks covers at most (a board's watchers
	// are read in batches of this size, one after the other). A Lua script blocks Redis while it runs, and every
	// write waits behind it, so one read covers a bounded batch. Default 100, at most leaderboard.MaxFriends.
	RankReadBatch int
	// RankWatchTTL is how long Store.Watch(board) lasts while rank subscriptions exist on the board; it is
	// refreshed every third of it. Default 60 seconds.
	RankWatchTTL time.Duration
	// RankVerify is how often every watched rank is read from Redis again although the change events kept it
	// up to date (rank.go derives watched ranks from the events instead of re-reading them); a safety net, not
	// a correction the events need. Default 30 seconds.
	RankVerify time.Duration
	// CacheSize is how many board views (board, window, period) Top keeps cached and fresh without any
	// subscription; the least recently used one is dropped beyond it. Default 1000.
	CacheSize int
	// ViewIdle is how long a view that Top cached stays cached (and re-read on changes) after its last use; then
	// it is dropped, with its board's goroutine and Redis subscription when nothing else uses them. Checked
	// every PeriodCheck. Default 60 seconds.
	ViewIdle time.Duration
	// PeriodCheck is how often subscriptions that follow the current period look for a rollover (by the store's
	// clock, Store.Now, which tests inject), and how often the watch key is checked. Default 1 second.
	PeriodCheck time.Duration
	// CallerStore serves the reads that Top makes on behalf of its callers (pages beyond the cached lists, views
	// not cached yet), so that they count against that store's bounds (leaderboard.Config.MaxReads) and not
	// against the hub's own refreshes. Default: the hub's store.
	CallerStore *leaderboard.Store
	// Logger receives warnings (lost connections, failed reads, dropped subscribers). Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) normalize() {
	if c.MaxUpdateRate <= 0 {
		c.MaxUpdateRate = 10
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1
	}
	if c.RankReadBatch <= 0 || c.RankReadBatch > leaderboard.MaxFriends {
		c.RankReadBatch = 100
	}
	if c.SnapshotAfter <= 0 {
		c.SnapshotAfter = 8
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = 30 * time.Second
	}
	if c.RankWatchTTL <= 0 {
		c.RankWatchTTL = time.Minute
	}
	if c.RankVerify <= 0 {
		c.RankVerify = 30 * time.Second
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 1000
	}
	if c.ViewIdle <= 0 {
		c.ViewIdle = time.Minute
	}
	if c.PeriodCheck <= 0 {
		c.PeriodCheck = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// TopUpdate is one message of a top-list subscription. Its slices are shared with other subscribers: read them,
// never modify them.
type TopUpdate struct {
	Board  string
	Window leaderboard.Window
	Period string
	// Version counts the updates of this subscription: 1 is the first snapshot, then +1 per update, no gaps.
	Version int64
	// Snapshot: Entries is the whole list. Otherwise Entries holds the rows that entered or changed rank, tieRank,
	// score, display name or metadata, and Removed the players who left the list. (TopPercent of rows that did
	// not change is not resent when only the size changed; Size is current.)
	Snapshot bool
	Entries  []leaderboard.Entry
	Removed  []string
	// Size is the number of players in the window period when the list was read.
	Size int64

	shared *payload
}

// Shared returns build(u), computed once per distinct key for every subscriber that receives the same content
// (same diff or snapshot, same board, window and period), and shared by them. It lets a transport encode an
// update once for thousands of subscribers. build must not depend on Version, the only per-subscription field.
func (u *TopUpdate) Shared(key string, build func(*TopUpdate) []byte) []byte {
	if u.shared == nil {
		return build(u)
	}
	// Thousands of subscribers ask at the same moment: the first builds, the others wait for its result.
	v, ok := u.shared.memo.Load(key)
	if !ok {
		v, _ = u.shared.memo.LoadOrStore(key, &memoEntry{})
	}
	e := v.(*memoEntry)
	e.once.Do(func() { e.val = build(u) })
	return e.val
}

// memoEntry is one shared encoding, built once.
type memoEntry struct {
	once sync.Once
	val  []byte
}

// payload is the content of an update that many subscribers share.
type payload struct {
	snapshot bool
	entries  []leaderboard.Entry
	removed  []string
	size     int64
	memo     sync.Map // key -> *memoEntry, see TopUpdate.Shared
}
