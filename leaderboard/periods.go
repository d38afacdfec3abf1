package leaderboard

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClosedPeriod is a closed period of a window that can still be read.
type ClosedPeriod struct {
	Period  string    // the period key ("2026-11-29", "2026-W48", "2026-11")
	Size    int64     // players with a score in it
	EndedAt time.Time // when it ended: the start of the next period, in the board's time zone
}

// Periods returns the closed periods of window w of a board (zero: the board's first window) that the board still
// keeps and that received a score, newest first, by the store's clock: a period is kept until its retention (the
// Retention periods that follow it) and the grace window have passed (the same rule that sets its keys' expiry).
// For SEASON: the seasons that have ended and are still readable (Seasons), by start, the latest first. ALL_TIME
// has no closed periods. One pipelined read of the periods' state keys (at most Retention+1 for calendar windows).
// With the ledger, the periods whose standings are frozen there and that Redis no longer keeps come too, by end
// (frozenread.go): history outlives the retention.
func (s *Store) Periods(ctx context.Context, board string, w Window) ([]ClosedPeriod, error) {
	b, err := s.windowBoard(ctx, board, w)
	if err != nil {
		return nil, err
	}
	if w == "" {
		w = b.DefaultWindow()
	}
	out := []ClosedPeriod{}
	if w == AllTime {
		return out, nil
	}
	now := s.cfg.Clock()
	var keys []string
	var ends []time.Time
	if w == Season {
		// The seasons that have ended and are still readable, the latest first.
		seasons, err := s.Seasons(ctx, board)
		if err != nil {
			return nil, err
		}
		for i := len(seasons) - 1; i >= 0; i-- {
			if si := seasons[i]; !si.Running {
				keys, ends = append(keys, si.ID), append(ends, si.EndsAt)
			}
		}
	} else {
		cur := periodStart(w, now, b.Location())
		for i := 1; ; i++ {
			st := nextStart(w, cur, -i)
			if b.expireAt(w, st) <= now.Unix() {
				break
			}
			keys, ends = append(keys, periodKey(w, st)), append(ends, nextStart(w, st, 1))
		}
	}
	if len(keys) == 0 {
		return s.frozenPeriods(ctx, b, w, out)
	}
	release, err := s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	pipe := s.rdb.Pipeline()
	bases := s.ShardKeyBases(b) // a sharded board's period has players on every shard
	cmds := make([][]*redis.StringCmd, len(keys))
	for i, p := range keys {
		for _, base := range bases {
			cmds[i] = append(cmds[i], pipe.HGet(ctx, keyState.at(base, w, p), "cnt"))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError(err)
	}
	for i, p := range keys {
		var size int64
		played := false
		for _, cmd := range cmds[i] {
			if n, err := cmd.Int64(); err == nil { // no state: nobody scored in the period (on that shard)
				size += n
				played = true
			}
		}
		if played {
			out = append(out, ClosedPeriod{Period: p, Size: size, EndedAt: ends[i]})
		}
	}
	return s.frozenPeriods(ctx, b, w, out)
}
