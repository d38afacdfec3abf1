package leaderboard

import (
	"context"
	"strconv"
	"time"
)

// EventKind is what a ledger event does to a board.
type EventKind uint8

// The kinds of ledger events. The values are stored in the ledger: never renumber them.
const (
	EventSubmit      EventKind = 1 // a submission (Submit, every item of SubmitMany)
	EventRemove      EventKind = 2 // RemovePlayer
	EventCreate      EventKind = 3 // CreateBoard: Args is the definition (StoredDefinition)
	EventDelete      EventKind = 4 // DeleteBoard
	EventSeasonStart EventKind = 5 // StartSeason: Args is {"id": ..., "endsAt": ms}
	EventSeasonEnd   EventKind = 6 // EndSeason
	EventVoid        EventKind = 7 // VoidScoreEvents: Args is VoidArgs; the submissions it names stop counting
	EventClose       EventKind = 8 // a close recorded (the fence of periods; see close.go): Args is CloseArgs
)

// CloseArgs are an EventClose's arguments: the periods it closes.
type CloseArgs struct {
	Periods []ClosedPeriodArg `json:"periods"`
	Force   bool              `json:"force,omitempty"`
}

// ClosedPeriodArg is one period of an EventClose.
type ClosedPeriodArg struct {
	Window  Window `json:"w"`
	Period  string `json:"p"`
	EndedAt int64  `json:"end"`           // unix ms
	MarkTTL int64  `json:"ttl,omitempty"` // s: the least life of its fence
}

// VoidArgs are an EventVoid's arguments.
type VoidArgs struct {
	EventIDs []string `json:"eventIds"` // client eventIds, or '#<seq>' for a submission recorded without one
	Reason   string   `json:"reason"`
}

// LedgerEvent is one write as the durable record keeps it: everything the index needs to apply it again exactly
// as it was applied the first time, in the order of Seq.
type LedgerEvent struct {
	// Seq is the event's place in its board's history: 1, 2, 3, … without gaps. The index applies a board's
	// events in this order, so the index is a function of the ledger.
	Seq  int64
	Kind EventKind
	// Player, Score, EventID, Fingerprint, AchievedAt, Name and Meta are a submission's (Score is the delta on a
	// SUM board); Player also names a removal's player.
	Player      string
	Score       float64
	EventID     string // the client's; "" when it sent none
	Fingerprint string // what EventID stood for the first time (see fingerprint)
	AchievedAt  time.Time
	Name        *string
	Meta        *string // compact JSON object
	// Args are the other kinds' arguments (JSON).
	Args []byte
	// RecordedAt is the clock the index applied the event with (periods, grace, submission limits): applying it
	// again uses the same. Set by the ledger when it reads events (AppendBatch.RecordedAt when it records them).
	RecordedAt time.Time
	// Voided is set on a submission an EventVoid voided (VoidReason says why): it no longer counts.
	Voided     bool
	VoidReason string
	// Board is the ledger's key of the board the event belongs to (LedgerBoard.Key). An EventCreate's is kept by
	// the index (boardKeyField), and the other events' calls carry theirs (gateArg) to tell this board from one of
	// the same id before a deletion. Set by the ledger when it reads events (Appended.Board when it records them);
	// 0: unknown.
	Board int64

	// noneVoided is set, before it is applied, on an EventVoid that voided nothing (what it names was voided
	// already, or is no submission of the board): it passes the gate without marking the board for a rebuild
	// (voidScript).
	noneVoided bool
}

// Appended is what the ledger says of an event it was asked to record.
type Appended struct {
	Seq int64 // the event's sequence number; for a duplicate, the first event's
	// Duplicate: an event with the same EventID is already recorded (with Seq and Fingerprint); nothing was added.
	Duplicate   bool
	Fingerprint string
	// Voided is how many submissions an EventVoid voided (those it names that counted until then).
	Voided int
	// Board is the ledger's key of the board (LedgerEvent.Board).
	Board int64
}

// LedgerBoard is a board as the ledger knows it.
type LedgerBoard struct {
	ID  string
	Key int64 // the ledger's own id of this board (a board id re-created after a deletion gets a new one)
	// Head is the sequence number of the board's last event (its high-water mark).
	Head int64
}

// Ledger is the durable record a Store writes ahead to (package ledger keeps it in PostgreSQL). Every method is
// safe for concurrent use.
type Ledger interface {
	// Append records events for boards in one durable commit and returns what it made of each, in order.
	// On an error nothing was recorded.
	Append(ctx context.Context, batches []AppendBatch) ([][]Appended, error)
	// Board returns the live board with this id; ok is false when the ledger holds none.
	Board(ctx context.Context, id string) (b LedgerBoard, ok bool, err error)
	// Events returns up to limit events of the board with ledger key key after seq after, in order.
	Events(ctx context.Context, key, after int64, limit int) ([]LedgerEvent, error)
	// Boards returns every live board.
	Boards(ctx context.Context) ([]LedgerBoard, error)
	// PlayerEvents returns up to limit submissions of a player on the board with ledger key key after seq after,
	// oldest first.
	PlayerEvents(ctx context.Context, key int64, player string, after int64, limit int) ([]LedgerEvent, error)

	// Freeze writes a version of a closed period's final standings (rows: ranks 1..n in order) in one commit,
	// with a delivery not completed yet for each webhook consumer group of groups (Config.OutboxGroups);
	// created is false when that version exists already (nothing changes).
	Freeze(ctx context.Context, key int64, fp FrozenPeriod, rows []Entry, groups []string) (created bool, err error)
	// Frozen returns the newest version of a period's frozen standings; ok is false when it has none.
	Frozen(ctx context.Context, key int64, w Window, period string) (fp FrozenPeriod, ok bool, err error)
	// FrozenPeriods returns the newest version of each frozen period of a window, the latest ended first.
	FrozenPeriods(ctx context.Context, key int64, w Window) ([]FrozenPeriod, error)
	// FrozenRows returns up to limit rows of a version's standings after rank after, in rank order.
	FrozenRows(ctx context.Context, key int64, w Window, period string, version int, after int64, limit int) ([]Entry, error)
	// FrozenPlayers returns the rows of those players that have one in a version's standings, in rank order.
	FrozenPlayers(ctx context.Context, key int64, w Window, period string, version int, players []string) ([]Entry, error)
	// Announced records the outbox id of the close event that announced a version, and when it was recorded
	// (zero: unknown).
	Announced(ctx context.Context, key int64, w Window, period string, version int, outboxID string, at time.Time) error
	// Undelivered returns up to limit announced versions of live boards (of the board with ledger key key; 0:
	// every board with a key above after) whose delivery to one of groups has not completed, by board key and
	// then oldest announcement first.
	Undelivered(ctx context.Context, key, after int64, groups []string, limit int) ([]Undelivered, error)
	// Delivered records that the delivery of a version of a live board's frozen standings to a consumer group
	// completed: delivered (a 2xx answer) or, with gaveUp, dead-lettered. The first outcome stays.
	Delivered(ctx context.Context, board string, w Window, period string, version int, group string, gaveUp bool,
		at time.Time) error
	// DeliveryDone reports whether Delivered recorded the delivery of a version to a consumer group.
	DeliveryDone(ctx context.Context, board string, w Window, period string, version int, group string) (bool, error)
	// Refuse marks recorded submissions of a board that the index refused when they were applied as not counting
	// (voided at recorded, with the refusal as the reason), unless they are voided already.
	Refuse(ctx context.Context, board string, recorded time.Time, refusals []Refusal) error
}

// Refusal is a recorded submission the index refused (a submission limit, a total out of range, a closed
// period): its client was told so, and no later restore may count it, although the events before it may then be
// others (a void's rebuild). Ledger.Refuse marks it.
type Refusal struct {
	Seq    int64
	Reason string
}

// FrozenPeriod is one version of a closed period's final standings as the ledger keeps them. Version 1 is
// written at the close, before the close event goes out; a void of one of the period's events writes the next,
// with the void's reason, and a correction event announces it.
type FrozenPeriod struct {
	Window   Window
	Period   string
	Version  int
	Reason   string    // why this version replaced the one before ("" for version 1)
	EndedAt  time.Time // when the period ended
	FrozenAt time.Time // when this version was written (the store's clock)
	Size     int64     // players with a score in the period: topPercent is 100 * rank / Size
	Rows     int64     // rows kept: the exact ranking (on exactTop boards, the exact tier)
	OutboxID string    // the close event that announced this version; "" until it is sent
}

// Undelivered is an announced version of a period's frozen standings whose delivery to a webhook has not
// completed (Ledger.Undelivered): the board, its ledger key, the version, and when its event was first recorded
// (zero: unknown, before the ledger kept it).
type Undelivered struct {
	Board string
	Key   int64
	FrozenPeriod
	AnnouncedAt time.Time
}

// AppendBatch is the events of one board for Ledger.Append, in the order they are to apply.
type AppendBatch struct {
	Board  string
	Events []LedgerEvent
	// RecordedAt is the clock the index applies these events with (LedgerEvent.RecordedAt).
	RecordedAt time.Time
}

// AssignedSeq reads an eventId the ledger assigned ('#<seq>', for a submission recorded without one).
func AssignedSeq(id string) (int64, bool) {
	if len(id) < 2 || id[0] != '#' {
		return 0, false
	}
	n, err := strconv.ParseInt(id[1:], 10, 64)
	return n, err == nil && n > 0
}

// EventName is the eventId of a recorded submission as clients see it: the client's, or '#<seq>'.
func (e *LedgerEvent) EventName() string {
	if e.EventID != "" {
		return e.EventID
	}
	return "#" + strconv.FormatInt(e.Seq, 10)
}
