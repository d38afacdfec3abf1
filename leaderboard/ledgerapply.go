package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// ledgerapply.go: recorded events applied to the index (ledgered.go records them; sequencer.go orders them; a
// restore applies the same events, restore.go): each kind's ledgered script call and its arguments.

// applySubmitEvents applies recorded submissions of one board in one ledgered submit call (dup: the ledger had
// the event's eventId already). Their outcomes are in order (a restore's applied items have neither result nor error);
// an error is the whole call's.
func (s *Store) applySubmitEvents(ctx context.Context, board string, evs []*LedgerEvent, dup []bool, fields int,
	restore bool, now time.Time, gapped gappedFunc) ([]Outcome, error) {
	out := make([]Outcome, len(evs))
	var reply []any
	var firstPeriods []string
	sent := make([]int, 0, len(evs))
	var sharded []Outcome
	err := s.fresh(board, func() error {
		v, err := s.boardFor(ctx, board, restore)
		if err != nil {
			return err
		}
		b := v.b
		if b.Sharded() {
			sharded, err = s.applySubmitsSharded(ctx, board, v, evs, dup, fields, restore, now, gapped)
			return err
		}
		args := make([]any, submitHeaderArgs, submitHeaderArgs+len(evs)*(submitItemArgs+2*len(b.Windows))+1)
		copy(args, v.submitHead)
		args[submitNowArg], args[submitFieldsArg] = now.Unix(), scriptFields(fields)
		if restore {
			args[submitPublishArg] = "" // nobody watches a board being restored
		}
		sent, firstPeriods = sent[:0], firstPeriods[:0]
		seqs := make([]int64, 0, len(evs))
		for i, e := range evs {
			var period string
			var err error
			args, period, err = s.appendEvent(args, b, board, e, now)
			if err != nil {
				// Refused here, and again by any restore: not sent, but its seq is in the call's range.
				out[i].Err = err
				continue
			}
			sent = append(sent, i)
			firstPeriods = append(firstPeriods, period)
			seqs = append(seqs, e.Seq)
		}
		args[submitCountArg] = len(sent)
		first, last := seqRange(evs, dup)
		args = append(args, gateArg(restore, boardOf(evs), first, last, seqs, s.keyClock(v, now)))
		return gapped(ctx, board, first, func() error {
			r, err := s.fns.run(ctx, submitLedgerScript, []string{v.keys}, args...).Slice()
			if err == nil && len(r) != len(sent) {
				err = fmt.Errorf("submit script returned %d replies for %d items", len(r), len(sent))
			}
			reply = r
			return redisError(err)
		})
	})
	if err != nil || sharded != nil {
		return sharded, err
	}
	v, err := s.boardFor(ctx, board, restore)
	if err != nil {
		return nil, err
	}
	for k, i := range sent {
		if out[i].Err != nil {
			continue
		}
		if row, ok := reply[k].([]any); ok && restore && len(row) == 1 && toString(row[0]) == "ok" {
			continue // a restore's applied item: no result (submit.lua's building)
		}
		if row, ok := reply[k].([]any); ok && len(row) == 1 && toString(row[0]) == "seen" {
			out[i].Result, out[i].Err = s.seenResult(ctx, v.b, evs[i])
			continue
		}
		out[i].Result, out[i].Err = parseSubmitReply(v.b, reply[k], firstPeriods[k], evs[i].Player)
		if out[i].Result == nil && out[i].Err == nil {
			out[i].Err = &Error{Code: Internal, Message: "internal error"}
		}
	}
	return out, nil
}

// appendEvent appends a recorded submission's script arguments as appendItem does, with the clock it was recorded
// and first applied with (LedgerEvent.RecordedAt; now when unset) as the item's own: one call of a restore or
// catch-up carries events recorded at different times, each applied again as it was. A voided event is refused
// (Invalid), as every restore refuses it; on an error args is returned as it was.
func (s *Store) appendEvent(args []any, b *Board, board string, e *LedgerEvent, now time.Time) ([]any, string, error) {
	clock := now
	if !e.RecordedAt.IsZero() {
		clock = e.RecordedAt
	}
	n := len(args)
	args, period, err := s.appendItem(args, b, e.submission(board), clock, e.Fingerprint)
	if err != nil {
		return args, "", err
	}
	if e.Voided {
		return args[:n], "", errorf(Invalid, "voided: %s", e.VoidReason)
	}
	args[n+submitClockItemArg] = clock.Unix()
	return args, period, nil
}

// seenResult is the result of a submission the index applied before (a retry the ledger recognised after its
// dedupe record expired or a restore went without it, or an event applied by another process's catch-up): the
// player's entry now. A player without one now (removed, or every score voided since) gets the submission as sent,
// unranked (rank 0): Entry is non-null, and the retry must still say that the first was applied.
func (s *Store) seenResult(ctx context.Context, b *Board, e *LedgerEvent) (*Result, error) {
	v := View{Board: b.ID, Window: b.Windows[0]}
	en, err := s.Rank(ctx, v, e.Player)
	if err != nil {
		return nil, err
	}
	r := &Result{Window: b.Windows[0], Duplicate: true}
	if en != nil {
		r.Entry = *en
		r.Size, _ = s.Size(ctx, v)
	} else {
		r.Entry = Entry{PlayerID: e.Player, DisplayName: e.Name, Score: e.Score, UpdatedAt: e.AchievedAt}
		if e.Meta != nil {
			r.Entry.Metadata = []byte(*e.Meta)
		}
		if r.Entry.UpdatedAt.IsZero() {
			r.Entry.UpdatedAt = e.RecordedAt
		}
	}
	if res, err := s.Resolve(ctx, v); err == nil {
		r.Period = res.Period
	}
	return r, nil
}

// submission is a recorded submission as Store.Submit takes it.
func (e *LedgerEvent) submission(board string) Submission {
	sub := Submission{Board: board, Player: e.Player, Score: e.Score, EventID: e.EventID, DisplayName: e.Name,
		AchievedAt: e.AchievedAt}
	if e.Meta != nil {
		sub.Metadata = []byte(*e.Meta)
	}
	return sub
}

// errNotLedgered is the refusal of a write to a board that Redis holds and the ledger does not: it was created
// before the ledger was turned on, and has no durable record to add to.
func errNotLedgered(board string) error {
	return errorf(Invalid, "leaderboard %q was created before the ledger (DATABASE_URL) was on and has no durable "+
		"record: export it, delete it and create it again", board)
}

// ledgerError turns the ledger's NotFound (the board is not in the ledger) into errNotLedgered when Redis holds
// the board.
func (s *Store) ledgerError(ctx context.Context, board string, err error) error {
	if ErrorCode(err) != NotFound {
		return err
	}
	if ok, _ := s.Exists(ctx, board); ok {
		return errNotLedgered(board)
	}
	return errorf(NotFound, "no leaderboard with id %q", board)
}

// applyEvent applies a recorded event other than a submission (dup: the ledger had it already). Its reply is the
// script's; an event applied before replies nil.
func (s *Store) applyEvent(ctx context.Context, board string, e *LedgerEvent, dup, restore bool, now time.Time,
	gapped gappedFunc) (any, error) {
	first, last := e.Seq, e.Seq
	if dup {
		first, last = 0, 0
	}
	ttlNow := s.cfg.Clock()
	if v, ok := s.restoring.Load(board); ok && restore {
		ttlNow = s.keyClock(v.(*cachedBoard), now)
	}
	gate := gateArg(restore, e.Board, first, last, []int64{e.Seq}, ttlNow)
	if v, ok, err := s.shardedFor(ctx, board, e, restore); err != nil || ok {
		if err != nil {
			return nil, err
		}
		if e.Kind == EventCreate && !restore {
			if dup {
				return s.createdBefore(ctx, board)
			}
			if _, err := s.clearLeftShards(ctx, v.b); err != nil {
				return nil, err
			}
		}
		apply := func() (any, error) { return s.applyEventSharded(ctx, board, v, e, first, gate, restore, now, gapped) }
		if e.Kind == EventCreate {
			return s.createPurging(ctx, board, apply)
		}
		return apply()
	}
	var reply any
	call := func(sc *script, keys []string, args ...any) error {
		return gapped(ctx, board, first, func() error {
			r, err := s.fns.run(ctx, sc, keys, append(args, gate)...).Result()
			reply = r
			if seenErr(err) {
				reply, err = nil, nil
			}
			return redisError(err)
		})
	}
	switch e.Kind {
	case EventDelete:
		return nil, nil // DeleteBoard deletes the keys once the ledger has the deletion
	case EventClose:
		v, err := s.boardFor(ctx, board, restore)
		if err != nil {
			return nil, err
		}
		args, err := s.closeArgs(v.b, e, now)
		if err != nil {
			return nil, err
		}
		return reply, call(closeLedgerScript, []string{v.keys, s.outboxKey(board)}, args...)
	case EventVoid:
		v, err := s.boardFor(ctx, board, restore)
		if err != nil {
			return nil, err
		}
		return reply, call(voidScript(e), []string{v.keys}, v.b.sum)
	case EventCreate:
		if dup && !restore {
			return s.createdBefore(ctx, board)
		}
		keys := []string{s.makeKeyBase(board), s.registryKey(board)}
		return s.createPurging(ctx, board, func() (any, error) {
			err := call(createLedgerScript, keys, string(e.Args), board, "", e.boardArg())
			return reply, err
		})
	case EventRemove:
		v, err := s.boardFor(ctx, board, restore)
		if err != nil {
			return nil, err
		}
		pub := s.publishArg()
		if restore {
			pub = ""
		}
		args, err := s.removeArgs(ctx, v.b, v.keys, e.Player, pub, now)
		if err != nil {
			return nil, err
		}
		return reply, call(removeLedgerScript, []string{v.keys}, args...)
	case EventSeasonStart, EventSeasonEnd:
		v, err := s.boardFor(ctx, board, restore)
		if err != nil {
			return nil, err
		}
		args, err := seasonEventArgs(v.b, e, now)
		if err != nil {
			return nil, err
		}
		return reply, call(seasonLedgerScript, []string{v.keys}, args...)
	}
	return nil, fmt.Errorf("ledger: event %d of board %q has unknown kind %d", e.Seq, board, e.Kind)
}

// voidScript is the script an EventVoid passes the gate with: mark.lua, which marks the board until the rebuild
// that takes the void's submissions out is done, or pass.lua for a void that voided nothing (noneVoided), which no
// rebuild is owed for. A void applied without its count (a catch-up's) marks.
func voidScript(e *LedgerEvent) *script {
	if e.noneVoided {
		return passLedgerScript
	}
	return markLedgerScript
}

// removeArgs are the remove script's arguments for a removal of player applied with clock now, on the board (or
// shard) whose keys start at base: its live periods, and every season it holds.
func (s *Store) removeArgs(ctx context.Context, b *Board, base, player, pub string, now time.Time) ([]any, error) {
	args := []any{b.sum, player, pub, channelOf(base)}
	for _, wp := range b.livePeriods(now) {
		args = append(args, windowCodes[wp.Window], wp.Period)
	}
	if b.HasWindow(Season) {
		ids, err := s.rdb.HKeys(ctx, keySeasons.of(base)).Result()
		if err != nil {
			return nil, redisError(err)
		}
		slices.Sort(ids)
		for _, id := range ids {
			args = append(args, windowCodes[Season], id)
		}
	}
	return args, nil
}

// seasonEventArgs are the season script's arguments for an EventSeasonStart or EventSeasonEnd applied with clock now.
func seasonEventArgs(b *Board, e *LedgerEvent, now time.Time) ([]any, error) {
	if e.Kind != EventSeasonStart {
		return []any{b.sum, "end", now.Unix()}, nil
	}
	var a seasonArgs
	if err := json.Unmarshal(e.Args, &a); err != nil {
		return nil, fmt.Errorf("ledger: season event %d: %w", e.Seq, err)
	}
	ends := time.Unix(a.EndsAt, 0)
	return []any{b.sum, "start", now.Unix(), a.ID, a.EndsAt, b.seasonExpiry(time.Unix(now.Unix(), 0), ends),
		int64(b.Grace / time.Second)}, nil
}

// createPurging runs a ledgered creation, and once more after purging what a deletion of the board still in
// progress (LB_DELETING) left.
func (s *Store) createPurging(ctx context.Context, board string, create func() (any, error)) (any, error) {
	r, err := create()
	if token, ok := deletingToken(err); ok {
		if err := s.purge(ctx, board, token); err != nil {
			return nil, err
		}
		return create()
	}
	return r, err
}

// createdBefore answers a creation the ledger had already: the ledger has the board, so Redis has it too, or lost
// it (then it is restored, never created empty).
func (s *Store) createdBefore(ctx context.Context, board string) (any, error) {
	if ok, err := s.Exists(ctx, board); err != nil || ok {
		return "same", err
	}
	return nil, s.missing(ctx, board)
}

// seasonArgs are an EventSeasonStart's arguments.
type seasonArgs struct {
	ID     string `json:"id"`
	EndsAt int64  `json:"endsAt"` // unix s
}
