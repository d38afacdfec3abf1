package leaderboard

import (
	"context"
	"fmt"
	"time"
)

// recordClosesSharded is recordCloses on a sharded board. A close must be final on every shard before its
// standings are read, and recorded once, in shard 0's outbox: first every shard fences the periods (close.lua's
// mode 'f': '~' where the shard has players, or where shard 0 must announce; from then on no shard takes a score
// for them), then the merged standings are read and shard 0 announces them (mode 'a'), which sets its fence to the
// event's outbox id. A process that stops in between leaves shard 0's fence at '~', and the next close check
// announces it.
func (s *Store) recordClosesSharded(ctx context.Context, b *Board, periods []closedPeriod, force bool) ([]closeResult, error) {
	v, err := s.loadBoard(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	out, todo, pending, err := s.closesDue(ctx, b, periods, force)
	if err != nil {
		return nil, err
	}
	if len(todo) > 0 {
		fence := func(base string, idx []int, forced bool) ([]string, error) {
			f := "0"
			if forced {
				f = "1"
			}
			args := []any{b.sum, b.ID, b.CloseEventTop, s.cfg.Clock().UnixMilli(), OutboxMaxLen, f, "f"}
			for _, i := range idx {
				p := periods[i]
				args = append(args, windowCodes[p.w], string(p.w), p.period, p.end.UnixMilli(),
					int64(max(p.markTTL, time.Second)/time.Second))
			}
			release, err := s.writes.acquire(ctx)
			if err != nil {
				return nil, err
			}
			defer release()
			reply, err := s.fns.run(ctx, closeScript, []string{base, keyOutbox.of(base)}, args...).StringSlice()
			if err != nil {
				return nil, redisError(err)
			}
			if len(reply) != 2*len(idx) {
				return nil, redisError(fmt.Errorf("close: %d replies for %d periods", len(reply), len(idx)))
			}
			return reply, nil
		}
		played := make(map[int]bool, len(todo))
		for _, base := range v.shards[1:] {
			reply, err := fence(base, todo, force)
			if err != nil {
				return nil, err
			}
			for k, i := range todo {
				if reply[2*k] == fencePending {
					played[i] = true
				}
			}
		}
		// Shard 0 announces what any shard played: forced where another shard has players.
		var plain, forced []int
		for _, i := range todo {
			if played[i] || force {
				forced = append(forced, i)
			} else {
				plain = append(plain, i)
			}
		}
		for _, group := range []struct {
			idx    []int
			forced bool
		}{{plain, false}, {forced, true}} {
			if len(group.idx) == 0 {
				continue
			}
			reply, err := fence(v.keys, group.idx, group.forced)
			if err != nil {
				return nil, err
			}
			for k, i := range group.idx {
				if id := reply[2*k]; id == fencePending {
					pending = append(pending, i)
				} else {
					out[i] = closeResult{id: id}
				}
			}
		}
	}
	for _, i := range pending {
		p := periods[i]
		r := Resolved{Board: b, Window: p.w, Period: p.period}
		page, err := s.topSharded(ctx, r, v, 0, b.CloseEventTop)
		if err != nil {
			return nil, err
		}
		top, err := encodeCloseTop(b, page.Entries)
		if err != nil {
			return nil, err
		}
		args := []any{b.sum, b.ID, b.CloseEventTop, s.cfg.Clock().UnixMilli(), OutboxMaxLen, "0", "a",
			windowCodes[p.w], string(p.w), p.period, p.end.UnixMilli(), page.Size, top, 1, "", ""}
		release, err := s.writes.acquire(ctx)
		if err != nil {
			return nil, err
		}
		reply, err := s.fns.run(ctx, closeScript, []string{v.keys, keyOutbox.of(v.keys)}, args...).StringSlice()
		release()
		if err != nil {
			return nil, redisError(err)
		}
		if len(reply) != 2 {
			return nil, redisError(fmt.Errorf("close: %d replies for 1 period", len(reply)))
		}
		out[i] = closeResult{id: reply[0], recorded: reply[1] == "1"}
	}
	return out, nil
}
