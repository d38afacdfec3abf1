package leaderboard

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Close events. A period closes when it has ended and the board's grace window after it has passed
// (Board.closedAt). Its close event (board, window, period, size, endedAt and the final top CloseEventTop ranks) is
// recorded once, by close.lua in the board's slot, in the board's outbox: a Redis stream that consumer groups (one
// per webhook, see internal/server) read at least once each.
//
// The close fence. In the same atomic step close.lua sets the period's close fence (common.lua's fence_key, read in
// Go by Store.Fence): "period P of board B is closed; its standings are final". Every script that writes a period
// (submit.lua for every window and season, bulk items alike, remove.lua) refuses a fenced one, so the standings the
// event announced are what the period holds for as long as its keys exist, whatever clocks the servers have and
// however late a request reaches Redis. Every closed period is fenced, also one nobody played (which records no
// event); the fence lives at least as long as the period's keys, and makes recording the event again a no-op,
// whichever process tries and however often.
const (
	OutboxMaxLen = 100 // entries each board's outbox (and dead-letter stream) keeps; the oldest go first
	// closeCatchUp bounds how many closed periods of one window one check looks at (a process that was down
	// records the ones it missed while their keys exist, up to this many).
	closeCatchUp = 32
	// minFenceTTL is the least a close fence of a period outside the calendar windows (RecordClose) lives;
	// close.lua keeps it longer when the period's keys live longer.
	minFenceTTL = 400 * 24 * time.Hour
)

var (
	//go:embed close.lua
	closeLua    string
	closeScript = newScript("close", closeLua, false)
	//go:embed group.lua
	groupLua    string
	groupScript = newScript("group", groupLua, false)
	//go:embed deadletter.lua
	deadLetterLua    string
	deadLetterScript = newScript("deadletter", deadLetterLua, false)
)

// CloseEvent is the record of a closed period.
type CloseEvent struct {
	OutboxID   string // the event's entry id in its board's outbox
	Board      string
	Window     Window
	Period     string
	Size       int64     // players with a score in the period when it closed
	EndedAt    time.Time // when the period ended (its grace window came after)
	RecordedAt time.Time // when the event was recorded (the recording store's clock)
	Top        []Entry   // ranks 1 .. the board's CloseEventTop, as `top` lists them
	// Version is the version of the period's frozen standings the event carries: 1 at the close, one more for
	// each correction after a void (freeze.go); Reason is the void's reason, nil for version 1.
	Version int
	Reason  *string
	// FirstID is set on an event sent again because Redis lost it before its delivery completed (resend.go): the
	// outbox id it was first sent with, which ID keeps. ResentAt is when it was sent again (the sending store's
	// clock); both are zero on an event sent once.
	FirstID  string
	ResentAt time.Time
}

// ID is the event's idempotency id: "pc_", 16 hex digits of the SHA-256 of the board id, "_", the outbox id it
// was first sent with (FirstID, else OutboxID). It is the same for every delivery of the event, also after Redis
// lost it and it was sent again, and differs between events.
func (e *CloseEvent) ID() string {
	h := sha256.Sum256([]byte(e.Board))
	id := e.OutboxID
	if e.FirstID != "" {
		id = e.FirstID
	}
	return "pc_" + hex.EncodeToString(h[:8]) + "_" + id
}

// closedAt reports whether a period that ended at end is closed at now: from its end plus the board's grace on.
// In milliseconds, the precision submit.lua compares in (season_of), so that a period closes at the same moment for
// the close check and for submissions. (Period bounds are whole seconds, and the grace whole milliseconds.)
func (b *Board) closedAt(end, now time.Time) bool {
	return now.UnixMilli() >= end.Add(b.Grace).UnixMilli()
}

// closedPeriod is a closed period of a calendar window.
type closedPeriod struct {
	w       Window
	period  string
	end     time.Time
	markTTL time.Duration
}

// closedPeriods returns the closed periods of b's calendar windows whose keys may still exist at now (at most
// closeCatchUp per window, oldest first), and when the next period of any of them closes.
func (b *Board) closedPeriods(now time.Time) (out []closedPeriod, next time.Time) {
	loc := b.Location()
	now = now.Truncate(time.Millisecond) // closedAt's precision: the oldest open period below is the same
	for _, w := range b.Windows {
		switch w {
		case Daily, Weekly, Monthly:
		default:
			continue
		}
		open := periodStart(w, now.Add(-b.Grace), loc) // the oldest period whose grace has not passed
		if due := nextStart(w, open, 1).Add(b.Grace); next.IsZero() || due.Before(next) {
			next = due
		}
		for i := closeCatchUp; i >= 1; i-- {
			st := nextStart(w, open, -i)
			exp := b.expireAt(w, st)
			if exp <= now.Unix() {
				continue
			}
			out = append(out, closedPeriod{w: w, period: periodKey(w, st), end: nextStart(w, st, 1),
				markTTL: time.Duration(exp-now.Unix())*time.Second + 24*time.Hour})
		}
	}
	return out, next
}

// RecordDueCloses closes every closed period of the board's calendar windows and every closed season (ended, by
// its endsAt or early, and its grace passed) that is not fenced yet: it sets its close fence and records its close
// event if it received at least one score (periods nobody played record none). It returns the outbox ids of the
// events it recorded and when the board's next close check is due (zero: never). Any number of processes may call
// it for the same board at once: each event is recorded once.
func (s *Store) RecordDueCloses(ctx context.Context, board string) (recorded []string, next time.Time, err error) {
	err = s.fresh(board, func() error {
		b, err := s.Board(ctx, board)
		if err != nil {
			return err
		}
		now := s.cfg.Clock()
		var due []closedPeriod
		due, next = b.closedPeriods(now)
		if b.HasWindow(Season) {
			seasons, snext, err := s.closedSeasons(ctx, b, now)
			if err != nil {
				return err
			}
			due = append(due, seasons...)
			if next.IsZero() || snext.Before(next) {
				next = snext
			}
		}
		res, err := s.recordCloses(ctx, b, due, false)
		recorded = recorded[:0]
		for _, r := range res {
			if r.recorded {
				recorded = append(recorded, r.id)
			}
		}
		return err
	})
	return recorded, next, err
}

// seasonRecheck bounds how long the close check of a board with a SEASON window waits: an admin may end the
// running season early at any time, on any server, and its close is due its grace after that.
const seasonRecheck = time.Minute

// closedSeasons returns the seasons of b that have closed (ended, and their grace has passed) and whose keys still
// exist, and when the board's close check is next due for its seasons: the running season's end plus the grace,
// or seasonRecheck from now if that is sooner.
func (s *Store) closedSeasons(ctx context.Context, b *Board, now time.Time) ([]closedPeriod, time.Time, error) {
	seasons, err := s.Seasons(ctx, b.ID)
	if err != nil {
		return nil, time.Time{}, err
	}
	next := now.Add(seasonRecheck)
	var out []closedPeriod
	for _, si := range seasons {
		if !b.closedAt(si.EndsAt, now) {
			if closes := si.EndsAt.Add(b.Grace); closes.Before(next) {
				next = closes
			}
			continue
		}
		// In seconds: a season may stay readable for over a thousand years (retention 1000 of a 400-day season),
		// beyond what time.Duration holds.
		secs := min(si.ReadableUntil.Unix()-now.Unix()+86400, math.MaxInt64/int64(time.Second))
		out = append(out, closedPeriod{w: Season, period: si.ID, end: si.EndsAt,
			markTTL: time.Duration(secs) * time.Second})
	}
	return out, next, nil
}

// RecordClose closes one period of any window of the board that ended at endedAt, on demand (tools, tests:
// calendar periods and seasons close by themselves, RecordDueCloses): it sets the period's close fence and records
// its close event unless the period has one already, even when the period received no score. It returns the
// event's outbox id and whether this call recorded it. Calling it for a period that has not closed yet closes it
// early: from then on it takes no score (a calendar period refuses them, a season is skipped).
func (s *Store) RecordClose(ctx context.Context, board string, w Window, period string, endedAt time.Time) (id string, recorded bool, err error) {
	err = s.fresh(board, func() error {
		if w == "" {
			return errorf(Invalid, "a window to close is required")
		}
		b, err := s.windowBoard(ctx, board, w)
		if err != nil {
			return err
		}
		ttl := minFenceTTL
		switch w {
		case AllTime:
			return errorf(Invalid, "the ALL_TIME window never closes")
		case Daily, Weekly, Monthly:
			start, err := ParsePeriod(w, period, b.Location())
			if err != nil {
				return err
			}
			ttl = max(time.Duration(b.expireAt(w, start)-s.cfg.Clock().Unix())*time.Second+24*time.Hour,
				24*time.Hour)
		default: // a window of its own (seasons): any period id
			if err := checkID("period", period); err != nil {
				return err
			}
		}
		res, err := s.recordCloses(ctx, b, []closedPeriod{{w: w, period: period, end: endedAt, markTTL: ttl}}, true)
		if err != nil {
			return err
		}
		id, recorded = res[0].id, res[0].recorded
		return nil
	})
	return id, recorded, err
}

// closeResult is close.lua's answer for one period: the outbox id of its event ("" when it has none) and whether
// this call recorded it.
type closeResult struct {
	id       string
	recorded bool
}

// recordCloses runs close.lua for periods of b.
func (s *Store) recordCloses(ctx context.Context, b *Board, periods []closedPeriod, force bool) ([]closeResult, error) {
	if len(periods) == 0 {
		return nil, nil
	}
	if s.seq != nil {
		return s.recordClosesLedgered(ctx, b, periods, force)
	}
	if b.Sharded() {
		return s.recordClosesSharded(ctx, b, periods, force)
	}
	forced := "0"
	if force {
		forced = "1"
	}
	args := []any{b.sum, b.ID, b.CloseEventTop, s.cfg.Clock().UnixMilli(), OutboxMaxLen, forced, "e"}
	for _, p := range periods {
		args = append(args, windowCodes[p.w], string(p.w), p.period, p.end.UnixMilli(),
			int64(max(p.markTTL, time.Second)/time.Second))
	}
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, closeScript, []string{s.keyBase(b.ID), s.outboxKey(b.ID)}, args...).StringSlice()
	release()
	if err != nil {
		return nil, redisError(err)
	}
	if len(reply) != 2*len(periods) {
		return nil, redisError(fmt.Errorf("close: %d replies for %d periods", len(reply), len(periods)))
	}
	out := make([]closeResult, len(periods))
	for i := range out {
		out[i] = closeResult{id: reply[2*i], recorded: reply[2*i+1] == "1"}
	}
	return out, nil
}

// decodeClose reads an outbox entry of board b.
func decodeClose(b *Board, m redis.XMessage) (CloseEvent, error) {
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	num := func(k string) int64 { n, _ := strconv.ParseInt(str(k), 10, 64); return n }
	e := CloseEvent{OutboxID: m.ID, Board: str("board"), Window: Window(str("window")), Period: str("period"),
		Size: num("size"), EndedAt: time.UnixMilli(num("endedAt")).UTC(),
		RecordedAt: time.UnixMilli(num("recordedAt")).UTC(), Top: []Entry{}, Version: 1}
	if v := num("version"); v > 1 {
		reason := str("reason")
		e.Version, e.Reason = int(v), &reason
	}
	if first := str("first"); first != "" { // sent again (resend.lua)
		e.FirstID, e.ResentAt = first, time.UnixMilli(num("resent")).UTC()
	}
	if e.Board != b.ID {
		return e, fmt.Errorf("outbox entry %s of board %q names board %q", m.ID, b.ID, e.Board)
	}
	var rows []any
	if t := str("top"); t != "{}" { // cjson encodes an empty table as an object
		if err := json.Unmarshal([]byte(t), &rows); err != nil {
			return e, fmt.Errorf("outbox entry %s: top: %w", m.ID, err)
		}
	}
	for _, row := range rows {
		en, err := parseEntry(b, row, e.Size)
		if err != nil {
			return e, fmt.Errorf("outbox entry %s: %w", m.ID, err)
		}
		e.Top = append(e.Top, en)
	}
	return e, nil
}

func (s *Store) decodeCloses(ctx context.Context, board string, msgs []redis.XMessage) ([]CloseEvent, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	b, err := s.Board(ctx, board)
	if err != nil {
		return nil, err
	}
	out := make([]CloseEvent, 0, len(msgs))
	for _, m := range msgs {
		if m.Values == nil {
			continue // claimed, but trimmed from the stream meanwhile
		}
		e, err := decodeClose(b, m)
		if err != nil {
			return nil, &Error{Code: Internal, Message: "internal error", Err: err}
		}
		out = append(out, e)
	}
	return out, nil
}

// Closes returns up to count close events of the board recorded after outbox id after ("0-0": from the
// oldest kept), oldest first.
func (s *Store) Closes(ctx context.Context, board, after string, count int) ([]CloseEvent, error) {
	msgs, err := s.rdb.XRangeN(ctx, s.outboxKey(board), "("+after, "+", int64(count)).Result()
	if err != nil {
		return nil, redisError(err)
	}
	return s.decodeCloses(ctx, board, msgs)
}

// ClosesMarked is Closes with the board's mark read at the same moment (one transaction), so that a follower of
// the outbox can tell the events of the board it follows from those of one created again since
// (BoardMark.RecreatedSince). A board Redis lacks is NotFound, or Unavailable while the ledger restores it.
func (s *Store) ClosesMarked(ctx context.Context, board, after string, count int) ([]CloseEvent, BoardMark, error) {
	var xr *redis.XMessageSliceCmd
	var mark func() (BoardMark, error)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		xr = p.XRangeN(ctx, keyOutbox.of(s.makeKeyBase(board)), "("+after, "+", int64(count))
		mark = s.queueMark(ctx, p, board)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, BoardMark{}, redisError(err)
	}
	m, err := mark()
	if err != nil {
		return nil, BoardMark{}, err
	}
	evs, err := s.decodeCloses(ctx, board, xr.Val())
	return evs, m, err
}

// LastCloseID returns the outbox id of the board's newest close event, "0-0" when it has none.
func (s *Store) LastCloseID(ctx context.Context, board string) (string, error) {
	msgs, err := s.rdb.XRevRangeN(ctx, s.outboxKey(board), "+", "-", 1).Result()
	if err != nil {
		return "", redisError(err)
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return msgs[0].ID, nil
}

// ClosesPeriods reports whether the board has a window whose periods close (any but ALL_TIME), so that it may
// have close events.
func (b *Board) ClosesPeriods() bool {
	for _, w := range b.Windows {
		if w != AllTime {
			return true
		}
	}
	return false
}
