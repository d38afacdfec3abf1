package leaderboard

import (
	"context"
	"time"
)

// replay.go: recorded events applied to the index again, in the ledger's order: a restore's (into keys nobody
// reads, paced by Config.RestoreRate and Config.RestoreShare), a catch-up's (where the board stands), a scratch
// replay's (scratch.go).

// catchUp applies a board's events after hwm up to upto from the ledger, where the board stands (it is readable
// meanwhile, as it is while any writes apply). Another process may apply the same events at once: the gate
// applies each once.
func (q *sequencer) catchUp(ctx context.Context, board string, hwm, upto int64) (int, error) {
	lb, ok, err := q.ledger.Board(ctx, board)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errorf(NotFound, "no leaderboard with id %q", board)
	}
	n := 0
	for hwm < upto {
		evs, err := q.ledger.Events(ctx, lb.Key, hwm, min(restoreBatch, int(upto-hwm)))
		if err != nil {
			return n, err
		}
		if len(evs) == 0 {
			return n, nil
		}
		if err := q.s.applyEvents(ctx, board, evs, nil); err != nil {
			return n, err
		}
		n += len(evs)
		hwm = evs[len(evs)-1].Seq
	}
	return n, nil
}

// plainCall is the gappedFunc of a restore or catch-up: the events come from the ledger in order, so a gap is an
// error.
func plainCall(_ context.Context, _ string, _ int64, call func() error) error { return call() }

// applyEvents applies recorded events of one board in order, each with the clock it was recorded with:
// consecutive submissions go in shared calls (applyCallEvents at most), each carrying its own clock (appendEvent).
// (Calls of one recording each made a board written by single submissions restore at 171 µs an event, 64 µs of
// them Redis's: BENCHMARKS.md, "The ledger".)
// A restore (rep not nil: the events go into keys nobody reads) rests after each call (restRestore) and counts
// its time in rep, and the submissions it refused that the ledger has not marked (rep.refused: a void took away
// what let them count).
func (s *Store) applyEvents(ctx context.Context, board string, evs []LedgerEvent, rep *RestoreReport) error {
	restore := rep != nil
	for i := 0; i < len(evs); {
		e := &evs[i]
		if e.Kind != EventSubmit {
			if _, err := s.applyEvent(ctx, board, e, false, restore, e.RecordedAt, plainCall); err != nil &&
				!IsRefusal(err) {
				return err
			}
			i++
			continue
		}
		j := i
		var chunk []*LedgerEvent
		at := e.RecordedAt // the call's clock: its earliest event's, which a scratch replay's keys live by
		for j < len(evs) && len(chunk) < applyCallEvents && evs[j].Kind == EventSubmit {
			chunk = append(chunk, &evs[j])
			if evs[j].RecordedAt.Before(at) {
				at = evs[j].RecordedAt // another process's clock, a little behind
			}
			j++
		}
		start := time.Now()
		outs, err := s.applySubmitEvents(ctx, board, chunk, nil, 0, restore, at, plainCall)
		if err != nil {
			return err
		}
		if restore {
			for k, o := range outs {
				// Only BAD_USER_INPUT: what a void can newly refuse (a SUM total out of range, a delta too small
				// for it). A restore also refuses the submissions of periods whose keys have expired since
				// (PERIOD_CLOSED), which counted and still count in the periods' frozen standings.
				if e := chunk[k]; ErrorCode(o.Err) == Invalid && !e.Voided {
					rep.refused = append(rep.refused, Refusal{Seq: e.Seq, Reason: refusalReason(o.Err)})
				}
			}
			if err := s.restRestore(ctx, start, len(chunk), rep); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// restRestore rests a restore after a script call of n events that started at start: for Config.RestoreShare
// of the call's time, and until those events are due at Config.RestoreRate. Time the restore spent elsewhere
// (reading PostgreSQL) earns no credit: the pace starts again from a call that begins after its due time.
func (s *Store) restRestore(ctx context.Context, start time.Time, n int, rep *RestoreReport) error {
	now := time.Now()
	worked := now.Sub(start)
	rep.Applying += worked
	var rest time.Duration
	if share := s.cfg.RestoreShare; share > 0 && share < 1 {
		rest = time.Duration(float64(worked) * (1 - share) / share)
	}
	rate := s.cfg.RestoreRate
	if rate == 0 {
		rate = DefaultRestoreRate
	}
	if rate > 0 {
		if rep.due.Before(start) {
			rep.due = start
		}
		rep.due = rep.due.Add(time.Duration(float64(n) * float64(time.Second) / rate))
		rest = max(rest, rep.due.Sub(now))
	}
	if rest <= 0 {
		return nil
	}
	defer func() { rep.Resting += time.Since(now) }()
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsRefusal reports whether err is a write's refusal (the client's to correct), not a failure to apply.
func IsRefusal(err error) bool {
	switch ErrorCode(err) {
	case Invalid, Conflict, PeriodClosed, RateLimited:
		return true
	}
	return false
}
