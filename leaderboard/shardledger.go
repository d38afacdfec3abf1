package leaderboard

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// shardledger.go: the ledger's events applied to a sharded board (shard.go). Every event of the board goes to every
// shard: a shard applies what is its own (its players' submissions and removals; creations, seasons, closes and
// voids on all) and lets the rest pass through its gate (pass.lua), so each shard's high-water mark follows the
// board's and the gate keeps its one rule on every shard: the board's events apply in the ledger's order, each
// once, whichever process sends them. A submission's arrival number is its seq: the ledger's order is the board's
// order of first arrival on every shard, and a restore gives every player the token it had.

var (
	//go:embed pass.lua
	passLua          string
	passLedgerScript = newScript("pass", passLua, false).ledgered()
)

// ledgeredOnShards runs one ledgered call per shard (calls[k]: shard k's, nil for none) in one parallel round trip,
// through gapped: a shard whose earlier events are missing gets them (gapped catches up every shard) and is called
// again, while a shard that applied the call is not. A shard that applied its call's event before (LB_SEEN) has a
// nil reply.
func (s *Store) ledgeredOnShards(ctx context.Context, board string, first int64, gapped gappedFunc,
	calls []*shardCall) ([]any, error) {
	replies := make([]any, len(calls))
	done := make([]bool, len(calls))
	err := gapped(ctx, board, first, func() error {
		var run []shardCall
		var which []int
		for k, c := range calls {
			if c != nil && !done[k] {
				run = append(run, *c)
				which = append(which, k)
			}
		}
		if len(run) == 0 {
			return nil
		}
		r, errs := s.runShards(ctx, run, false)
		var gapErr, other error
		low := int64(-1)
		for j, k := range which {
			switch hwm, gap := gapOf(errs[j]); {
			case errs[j] == nil || seenErr(errs[j]):
				replies[k], done[k] = r[j], true
				if errs[j] != nil {
					replies[k] = nil
				}
			case gap:
				if low < 0 || hwm < low {
					low, gapErr = hwm, errs[j] // catch up from the shard furthest behind
				}
			case other == nil:
				other = errs[j]
			}
		}
		if other != nil {
			return other
		}
		return gapErr
	})
	return replies, err
}

// applySubmitsSharded is applySubmitEvents on a sharded board: each shard's items in one call, the other shards
// passing the call's seqs, then (a live write) each item placed on the whole board as submitSharded places it.
func (s *Store) applySubmitsSharded(ctx context.Context, board string, v *cachedBoard, evs []*LedgerEvent, dup []bool,
	fields int, restore bool, now time.Time, gapped gappedFunc) ([]Outcome, error) {
	b := v.b
	out := make([]Outcome, len(evs))
	type shardItems struct {
		args    []any
		sent    []int
		periods []string
		seqs    []int64
	}
	byShard := make([]*shardItems, b.Shards)
	for k := range byShard {
		c := &shardItems{args: make([]any, submitHeaderArgs)}
		copy(c.args, v.submitHead)
		c.args[submitNowArg], c.args[submitFieldsArg] = now.Unix(), scriptFields(fields)
		c.args[submitChannelArg] = channelOf(v.shards[k])
		if restore {
			c.args[submitPublishArg] = "" // nobody watches a board being restored
		}
		byShard[k] = c
	}
	for i, e := range evs {
		c := byShard[ShardOf(e.Player, b.Shards)]
		n := len(c.args)
		args, period, err := s.appendEvent(c.args, b, board, e, now)
		if err != nil {
			out[i].Err = err // refused here, and again by any restore: its seq passes with the call's range
			continue
		}
		args[n+submitArrivalItemArg] = e.Seq
		c.args = args
		c.sent = append(c.sent, i)
		c.periods = append(c.periods, period)
		c.seqs = append(c.seqs, e.Seq)
	}
	first, last := seqRange(evs, dup)
	key, ttl := boardOf(evs), s.keyClock(v, now)
	calls := make([]*shardCall, b.Shards)
	for k, c := range byShard {
		if len(c.sent) == 0 {
			calls[k] = &shardCall{sc: passLedgerScript, base: v.shards[k],
				args: []any{b.sum, gateArg(restore, key, first, last, []int64{last}, ttl)}}
			continue
		}
		c.args[submitCountArg] = len(c.sent)
		calls[k] = &shardCall{sc: submitLedgerScript, base: v.shards[k],
			args: append(c.args, gateArg(restore, key, first, last, c.seqs, ttl))}
	}
	replies, err := s.ledgeredOnShards(ctx, board, first, gapped, calls)
	if err != nil {
		return nil, err
	}
	var done []written
	for k, c := range byShard {
		if len(c.sent) == 0 {
			continue
		}
		rows, _ := replies[k].([]any)
		if len(rows) != len(c.sent) {
			return nil, redisError(fmt.Errorf("submit script returned %d replies for %d items", len(rows), len(c.sent)))
		}
		for m, i := range c.sent {
			if row, ok := rows[m].([]any); ok && len(row) == 1 {
				switch toString(row[0]) {
				case "ok": // a restore's applied item: no result (submit.lua's building)
					continue
				case "seen":
					out[i].Result, out[i].Err = s.seenResult(ctx, b, evs[i])
					continue
				}
			}
			if d, ok := shardWritten(b, rows[m], c.periods[m], evs[i].Player, evs[i].EventID, i, k, &out[i]); ok {
				done = append(done, d)
			}
		}
	}
	if !restore {
		s.placeWritten(ctx, v, done, fields, out)
	}
	return out, nil
}

// applyEventSharded is applyEvent on a sharded board (v: its cached view; for a creation, the one its definition
// gives), for the kinds other than a deletion.
func (s *Store) applyEventSharded(ctx context.Context, board string, v *cachedBoard, e *LedgerEvent, first int64,
	gate string, restore bool, now time.Time, gapped gappedFunc) (any, error) {
	b := v.b
	every := func(sc *script, args ...any) []*shardCall {
		calls := make([]*shardCall, b.Shards)
		for k, base := range v.shards {
			calls[k] = &shardCall{sc: sc, base: base, args: append(append([]any(nil), args...), gate)}
			if sc == closeLedgerScript {
				calls[k].more = []string{keyOutbox.of(base)}
			}
		}
		return calls
	}
	// lastOnZero runs calls on shards 1.. first, then on shard 0 (made by zero from the others' replies): nobody
	// finds a change on the board before every shard has it. It returns shard 0's reply.
	lastOnZero := func(calls []*shardCall, zero func(others []any) (*shardCall, error)) (any, error) {
		c0 := calls[0]
		calls[0] = nil
		others, err := s.ledgeredOnShards(ctx, board, first, gapped, calls)
		if err != nil {
			return nil, err
		}
		if zero != nil {
			if c0, err = zero(others); err != nil {
				return nil, err
			}
		}
		r, err := s.ledgeredOnShards(ctx, board, first, gapped, []*shardCall{c0})
		return r[0], err
	}
	switch e.Kind {
	case EventCreate:
		calls := make([]*shardCall, b.Shards)
		for k, base := range v.shards {
			as := "shard"
			if k == 0 {
				as = ""
			}
			calls[k] = &shardCall{createLedgerScript, base, []any{string(e.Args), board, as, e.boardArg(), gate},
				[]string{s.registryOf(slotTag(HashSlot(base)))}}
		}
		return lastOnZero(calls, nil)
	case EventRemove:
		k := ShardOf(e.Player, b.Shards)
		base := v.shards[k]
		pub := s.publishArg()
		if restore {
			pub = ""
		}
		args, err := s.removeArgs(ctx, v.b, base, e.Player, pub, now)
		if err != nil {
			return nil, err
		}
		calls := every(passLedgerScript, b.sum)
		calls[k] = &shardCall{sc: removeLedgerScript, base: base, args: append(args, gate)}
		r, err := s.ledgeredOnShards(ctx, board, first, gapped, calls)
		if err != nil {
			return nil, err
		}
		return r[k], nil
	case EventVoid:
		r, err := s.ledgeredOnShards(ctx, board, first, gapped, every(voidScript(e), b.sum))
		if err != nil {
			return nil, err
		}
		return r[0], nil
	case EventSeasonStart, EventSeasonEnd:
		args, err := seasonEventArgs(v.b, e, now)
		if err != nil {
			return nil, err
		}
		return lastOnZero(every(seasonLedgerScript, args...), nil)
	case EventClose:
		args, err := s.closeArgs(v.b, e, now)
		if err != nil {
			return nil, err
		}
		return lastOnZero(every(closeLedgerScript, args...), func(others []any) (*shardCall, error) {
			return s.closeOnZero(ctx, v, args, others, gate)
		})
	}
	return nil, fmt.Errorf("ledger: event %d of board %q has unknown kind %d", e.Seq, board, e.Kind)
}

// closeOnZero is shard 0's call of a close on a sharded board: close.lua's mode 'F', each period forced where
// another shard fenced it with players ('~'), so that shard 0 announces it. A shard that had applied the close
// before (nil reply) tells by its fence.
func (s *Store) closeOnZero(ctx context.Context, v *cachedBoard, args []any, others []any, gate string) (
	*shardCall, error) {
	const head, per = 7, 5 // closeArgs: the header, then per period
	n := (len(args) - head) / per
	played := make([]bool, n)
	for k, r := range others {
		if k == 0 {
			continue
		}
		ids, _ := r.([]any)
		for p := range n {
			if r != nil {
				played[p] = played[p] || (len(ids) == 2*n && toString(ids[2*p]) == fencePending)
				continue
			}
			f, err := s.run(ctx, fenceScript, []string{v.shards[k]}, v.b.sum, args[head+p*per], args[head+p*per+2]).Slice()
			if err != nil {
				return nil, redisError(err)
			}
			played[p] = played[p] || (len(f) == 2 && toString(f[0]) == fencePending)
		}
	}
	zero := append([]any(nil), args[:head]...)
	zero[head-1] = "F"
	for p := range n {
		force := "0"
		if played[p] {
			force = "1"
		}
		zero = append(zero, args[head+p*per:head+(p+1)*per]...)
		zero = append(zero, force)
	}
	return &shardCall{sc: closeLedgerScript, base: v.shards[0], args: append(zero, gate),
		more: []string{keyOutbox.of(v.shards[0])}}, nil
}

// shardedFor returns the view of board that a ledgered event e applies to when the board is sharded (ok): for a
// creation, the one its definition gives. A deletion has none (DeleteBoard deletes the keys).
func (s *Store) shardedFor(ctx context.Context, board string, e *LedgerEvent, restore bool) (*cachedBoard, bool, error) {
	switch e.Kind {
	case EventDelete:
		return nil, false, nil
	case EventCreate:
		b, err := decodeBoard(string(e.Args))
		if err != nil || !b.Sharded() {
			return nil, false, err
		}
		return s.newCachedBoard(board, b), true, nil
	}
	v, err := s.boardFor(ctx, board, restore)
	if err != nil || !v.b.Sharded() {
		return nil, false, err
	}
	return v, true, nil
}
