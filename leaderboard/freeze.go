package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// freeze.go: with the ledger, a close is a freeze. The close event of the ledger sets the period's fence waiting
// ('~', close.lua mode 'f'); the period's standings (every row Top lists, with every field, and its size) are then
// written to the ledger as version 1 of its frozen standings, and only then does the close event go out, carrying
// the frozen top (mode 'a'). A process that stops between the steps leaves the fence waiting, and the next close
// check of any process goes on from there: it freezes what is not frozen and sends what was not sent (the ledger
// keeps the outbox id of each version's event). Reads of a closed period that Redis no longer holds answer from
// the frozen standings (frozenread.go); a void that changes them writes a new version and a correction event
// (correctFrozen). recordClosesLedgered, at the end, is the close itself with the ledger.

// fencePending is the fence of a period closed in the ledger whose event waits for its freeze.
const fencePending = "~"

// freezePage is how many rows one step of a freeze reads from Redis.
const freezePage = MaxFirst

// freezeAndAnnounce freezes the standings of closed periods of b that are not frozen yet and sends the close
// event of each that has not gone out; it returns each period's event.
func (s *Store) freezeAndAnnounce(ctx context.Context, b *Board, periods []closedPeriod) ([]closeResult, error) {
	lb, ok, err := s.seq.ledger.Board(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errorf(NotFound, "no leaderboard with id %q", b.ID)
	}
	out := make([]closeResult, len(periods))
	for i, p := range periods {
		fp, top, err := s.freeze(ctx, b, lb.Key, p)
		if err != nil {
			return nil, err
		}
		out[i], err = s.announce(ctx, b, lb.Key, fp, top)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// freeze returns the newest frozen standings of a closed period and its top (the board's CloseEventTop rows),
// freezing them from Redis first when the ledger has none.
func (s *Store) freeze(ctx context.Context, b *Board, key int64, p closedPeriod) (FrozenPeriod, []Entry, error) {
	l := s.seq.ledger
	fp, ok, err := l.Frozen(ctx, key, p.w, p.period)
	if err != nil {
		return fp, nil, err
	}
	if !ok {
		size, rows, err := s.standings(ctx, View{Board: b.ID, Window: p.w, Period: p.period})
		if err != nil {
			return fp, nil, err
		}
		fp = FrozenPeriod{Window: p.w, Period: p.period, Version: 1, EndedAt: p.end, FrozenAt: s.cfg.Clock(),
			Size: size, Rows: int64(len(rows))}
		created, err := l.Freeze(ctx, key, fp, rows, s.cfg.OutboxGroups)
		if err != nil {
			return fp, nil, err
		}
		if created {
			s.forgetFrozen(b.ID, p.w, p.period)
			return fp, rows[:min(len(rows), b.CloseEventTop)], nil
		}
		if fp, _, err = l.Frozen(ctx, key, p.w, p.period); err != nil { // another process froze it meanwhile
			return fp, nil, err
		}
	}
	top, err := l.FrozenRows(ctx, key, p.w, p.period, fp.Version, 0, b.CloseEventTop)
	return fp, top, err
}

// standings reads every row of a period that Top lists, and its size, from one moment (a Snapshot).
func (s *Store) standings(ctx context.Context, v View) (size int64, rows []Entry, err error) {
	sn, err := s.Snapshot(ctx, v)
	if err != nil {
		return 0, nil, err
	}
	defer sn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the copy expires by itself
	return sn.all(ctx)
}

// all reads every row of a snapshot.
func (sn *Snapshot) all(ctx context.Context) (size int64, rows []Entry, err error) {
	rows = make([]Entry, 0, sn.Rows)
	for int64(len(rows)) < sn.Rows {
		pg, err := sn.Page(ctx, len(rows), freezePage)
		if err != nil {
			return 0, nil, err
		}
		if len(pg.Entries) == 0 {
			break
		}
		rows = append(rows, pg.Entries...)
	}
	return sn.Size, rows, nil
}

// announce sends the close event of a version of frozen standings unless it went out already (the ledger has
// its outbox id, or the period's fence does for version 1), and records its outbox id in the ledger.
func (s *Store) announce(ctx context.Context, b *Board, key int64, fp FrozenPeriod, top []Entry) (closeResult, error) {
	topJSON, err := encodeCloseTop(b, top)
	if err != nil {
		return closeResult{}, err
	}
	now := s.cfg.Clock()
	args := []any{b.sum, b.ID, b.CloseEventTop, now.UnixMilli(), OutboxMaxLen, "0", "a",
		windowCodes[fp.Window], string(fp.Window), fp.Period, fp.EndedAt.UnixMilli(), fp.Size, topJSON,
		fp.Version, fp.Reason, fp.OutboxID}
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return closeResult{}, err
	}
	reply, err := s.run(ctx, closeScript, []string{s.keyBase(b.ID), s.outboxKey(b.ID)}, args...).StringSlice()
	release()
	if err != nil {
		return closeResult{}, redisError(err)
	}
	if len(reply) != 2 {
		return closeResult{}, redisError(fmt.Errorf("close: %d replies for 1 period", len(reply)))
	}
	r := closeResult{id: reply[0], recorded: reply[1] == "1"}
	if r.recorded || (fp.OutboxID == "" && r.id != "") {
		var at time.Time // when the event was recorded: now if this call recorded it, else unknown
		if r.recorded {
			at = now
		}
		if err := s.seq.ledger.Announced(ctx, key, fp.Window, fp.Period, fp.Version, r.id, at); err != nil {
			return r, err
		}
	}
	return r, nil
}

// encodeCloseTop encodes rows as close.lua writes a close event's top (the entry replies of the scripts, see
// parseEntry), so that decodeClose reads them back exactly.
func encodeCloseTop(b *Board, top []Entry) (string, error) {
	if len(top) == 0 {
		return "{}", nil // as cjson encodes an empty table
	}
	rows := make([][]any, len(top))
	for i, e := range top {
		meta := ""
		if e.DisplayName != nil || e.Metadata != nil {
			m := playerMeta{Name: e.DisplayName}
			if e.Metadata != nil {
				raw := string(e.Metadata)
				m.Meta = &raw
			}
			enc, err := json.Marshal(m)
			if err != nil {
				return "", err
			}
			meta = string(enc)
		}
		var ts int64
		if !e.UpdatedAt.IsZero() {
			ts = e.UpdatedAt.Unix()
		}
		rows[i] = []any{e.PlayerID, e.Rank, 0, strconv.FormatFloat(b.userScore(e.Score), 'g', -1, 64), ts, meta,
			e.TieRank}
	}
	enc, err := json.Marshal(rows)
	return string(enc), err
}

// correctFrozen brings the frozen standings of the board's closed periods in line with the events that count now
// (after a void and its rebuild): each period whose standings changed gets a new version with the reason, and a
// correction event (the close event again, with its version and reason) goes out. A period Redis still holds is
// read from Redis; the others from a scratch replay. It returns how many periods it corrected.
func (s *Store) correctFrozen(ctx context.Context, board, reason string) (int, error) {
	l := s.seq.ledger
	lb, ok, err := l.Board(ctx, board)
	if err != nil || !ok {
		return 0, err
	}
	b, err := s.Board(ctx, board)
	if err != nil {
		return 0, err
	}
	var frozen []FrozenPeriod
	for _, w := range b.Windows {
		if w == AllTime {
			continue
		}
		fps, err := l.FrozenPeriods(ctx, lb.Key, w)
		if err != nil {
			return 0, err
		}
		frozen = append(frozen, fps...)
	}
	now := make([]periodStandings, len(frozen))
	var expired []int
	for i, fp := range frozen {
		n, err := s.rdb.Exists(ctx, s.stateKey(board, fp.Window, fp.Period)).Result()
		if err != nil {
			return 0, redisError(err)
		}
		if n == 0 {
			expired = append(expired, i)
			continue
		}
		size, rows, err := s.standings(ctx, View{Board: board, Window: fp.Window, Period: fp.Period})
		if err != nil {
			return 0, err
		}
		now[i] = periodStandings{size: size, rows: rows}
	}
	if len(expired) > 0 {
		ask := make([]FrozenPeriod, len(expired))
		for k, i := range expired {
			ask[k] = frozen[i]
		}
		got, err := s.scratchStandings(ctx, board, lb.Key, b, ask)
		if err != nil {
			return 0, err
		}
		for k, i := range expired {
			now[i] = got[k]
		}
	}
	corrected := 0
	for i, fp := range frozen {
		old, err := s.frozenStandings(ctx, lb.Key, fp)
		if err != nil {
			return corrected, err
		}
		if fp.Size == now[i].size && sameRows(old, now[i].rows) {
			continue
		}
		next := FrozenPeriod{Window: fp.Window, Period: fp.Period, Version: fp.Version + 1, Reason: reason,
			EndedAt: fp.EndedAt, FrozenAt: s.cfg.Clock(), Size: now[i].size, Rows: int64(len(now[i].rows))}
		created, err := l.Freeze(ctx, lb.Key, next, now[i].rows, s.cfg.OutboxGroups)
		if err != nil {
			return corrected, err
		}
		s.forgetFrozen(board, fp.Window, fp.Period)
		if !created {
			continue // another process corrected it with the same version
		}
		if _, err := s.announce(ctx, b, lb.Key, next, now[i].rows[:min(len(now[i].rows), b.CloseEventTop)]); err != nil {
			return corrected, err
		}
		corrected++
	}
	return corrected, nil
}

// frozenStandings reads every row of a version of frozen standings.
func (s *Store) frozenStandings(ctx context.Context, key int64, fp FrozenPeriod) ([]Entry, error) {
	var rows []Entry
	for {
		page, err := s.seq.ledger.FrozenRows(ctx, key, fp.Window, fp.Period, fp.Version, int64(len(rows)), freezePage)
		if err != nil {
			return nil, err
		}
		rows = append(rows, page...)
		if len(page) < freezePage {
			return rows, nil
		}
	}
}

// sameRows reports whether two standings agree in the ranking a void can change: each row's player, rank,
// tieRank, score and updatedAt. Display names and metadata are the board's, not the period's (reads of a closed
// period show their latest values, and a player renamed by a submission to a later period is renamed there too):
// a difference in them alone is no correction of the period, which would otherwise be sent with the reason of any
// void after a rename. A correction that is due carries the names and metadata of its moment.
func sameRows(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.PlayerID != y.PlayerID || x.Rank != y.Rank || x.TieRank != y.TieRank || x.Score != y.Score ||
			x.UpdatedAt.UnixMilli() != y.UpdatedAt.UnixMilli() {
			return false
		}
	}
	return true
}

// recordClosesLedgered is recordCloses with a ledger: the close is an event of the ledger, so that a restore sets
// each fence where it was among the board's events (a late score the fence refused is refused again), and the
// close event goes out only once the standings are frozen (freeze.go). Periods fenced already are answered from
// their fences without an event, or, when their fence waits for the freeze, frozen and announced: every process
// checks closes, and the ledger records each close once (two processes racing may record it twice; the second
// changes nothing).
func (s *Store) recordClosesLedgered(ctx context.Context, b *Board, periods []closedPeriod, force bool) (
	[]closeResult, error) {
	out, todo, pending, err := s.closesDue(ctx, b, periods, force)
	if err != nil {
		return nil, err
	}
	if len(todo) > 0 {
		a := CloseArgs{Force: force}
		for _, i := range todo {
			p := periods[i]
			a.Periods = append(a.Periods, ClosedPeriodArg{Window: p.w, Period: p.period, EndedAt: p.end.UnixMilli(),
				MarkTTL: int64(max(p.markTTL, time.Second) / time.Second)})
		}
		args, _ := json.Marshal(a)
		r, err := s.writeOne(ctx, b.ID, LedgerEvent{Kind: EventClose, Args: args})
		if err != nil {
			return nil, err
		}
		reply, _ := r.([]any)
		if r != nil && len(reply) != 2*len(todo) {
			return nil, redisError(fmt.Errorf("close: %d replies for %d periods", len(reply), len(todo)))
		}
		for k, i := range todo {
			id := ""
			if r == nil { // applied before (by a catch-up)
				f, err := s.Fence(ctx, b.ID, periods[i].w, periods[i].period)
				if err != nil {
					return nil, err
				}
				if f != nil {
					id = f.OutboxID
				}
			} else {
				id = toString(reply[2*k])
			}
			if id == fencePending {
				pending = append(pending, i)
				continue
			}
			out[i] = closeResult{id: id}
		}
	}
	if len(pending) == 0 {
		return out, nil
	}
	wait := make([]closedPeriod, len(pending))
	for k, i := range pending {
		wait[k] = periods[i]
	}
	res, err := s.freezeAndAnnounce(ctx, b, wait)
	if err != nil {
		return nil, err
	}
	for k, i := range pending {
		out[i] = res[k]
	}
	return out, nil
}

// closesDue sorts periods of b by their close fences, for a close in two steps (the fence, then the event): out
// holds the event of each period closed already; todo lists the periods to fence (not fenced, or fenced without an
// event when force), pending those fenced whose event waits (fencePending).
func (s *Store) closesDue(ctx context.Context, b *Board, periods []closedPeriod, force bool) (
	out []closeResult, todo, pending []int, err error) {
	out = make([]closeResult, len(periods))
	for i, p := range periods {
		f, err := s.Fence(ctx, b.ID, p.w, p.period)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case f != nil && f.OutboxID == fencePending:
			pending = append(pending, i)
		case f != nil && !(force && f.OutboxID == ""):
			out[i] = closeResult{id: f.OutboxID}
		default:
			todo = append(todo, i)
		}
	}
	return out, todo, pending, nil
}

// closeArgs are the close script's arguments for an EventClose applied with clock now.
func (s *Store) closeArgs(b *Board, e *LedgerEvent, now time.Time) ([]any, error) {
	var a CloseArgs
	if err := json.Unmarshal(e.Args, &a); err != nil {
		return nil, fmt.Errorf("ledger: close event %d: %w", e.Seq, err)
	}
	forced := "0"
	if a.Force {
		forced = "1"
	}
	args := []any{b.sum, b.ID, b.CloseEventTop, now.UnixMilli(), OutboxMaxLen, forced, "f"}
	for _, p := range a.Periods {
		args = append(args, windowCodes[p.Window], string(p.Window), p.Period, p.EndedAt, max(p.MarkTTL, 1))
	}
	return args, nil
}
