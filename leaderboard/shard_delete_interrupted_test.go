package leaderboard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// failOn is a go-redis hook that fails, without sending it, every command naming a key under base while on.
type failOn struct {
	base string
	on   atomic.Bool
}

var errShardDown = errors.New("dial tcp: connection refused (test: the shard's node is down)")

func (f *failOn) hits(cmd redis.Cmder) bool {
	if !f.on.Load() {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasPrefix(s, f.base) {
			return true
		}
	}
	return false
}

func (f *failOn) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failOn) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.hits(cmd) {
			cmd.SetErr(errShardDown)
			return errShardDown
		}
		return next(ctx, cmd)
	}
}

func (f *failOn) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if f.hits(cmd) {
				cmd.SetErr(errShardDown)
				return errShardDown
			}
		}
		return next(ctx, cmds)
	}
}

// TestShardedInterruptedDeleteFinished: a deletion of a board of 3 shards fails part way (the node of its last
// shard cannot be reached once shard 0 is deleted). Whatever comes next finishes it, so that no key of the old
// board stays on any master: deleteLeaderboard again, or createLeaderboard of the id with another shard count (5,
// or 1) or the same; the new board holds none of the old players. Before, the deletion's rest was known only to the
// layout of the board that came next: a retried deletion answered false and a board of 5 shards or of one left
// shards 1 and 2 of the old one behind for good.
func TestShardedInterruptedDeleteFinished(t *testing.T) {
	t.Parallel()
	for _, next := range []int{0, 5, 1, 3} { // 0: deleteLeaderboard again
		t.Run(fmt.Sprintf("then=%d", next), func(t *testing.T) {
			t.Parallel()
			rdb := shardClient(t)
			ctx := context.Background()
			s, _ := shardStore(t, rdb)
			const id, shards = "half-gone", 3
			f := &failOn{base: lb.ShardKeyBase(s.Prefix(), id, shards-1, shards)}
			rdb.AddHook(f)
			mustBoard(t, s, lb.Board{ID: id, Windows: []lb.Window{lb.AllTime, lb.Daily}, Shards: shards})
			for i := range 60 {
				mustSubmit(t, s, lb.Submission{Board: id, Player: fmt.Sprintf("old%d", i), Score: float64(i),
					EventID: fmt.Sprintf("e%d", i)})
			}
			f.on.Store(true)
			if _, err := s.DeleteBoard(ctx, id); err == nil {
				t.Fatal("DeleteBoard with a shard's node down: no error")
			}
			f.on.Store(false)
			if next == 0 {
				if _, err := s.DeleteBoard(ctx, id); err != nil {
					t.Fatalf("DeleteBoard again: %v", err)
				}
			} else {
				mustBoard(t, s, lb.Board{ID: id, Windows: []lb.Window{lb.AllTime, lb.Daily}, Shards: next})
				v := lb.View{Board: id}
				if n, err := s.Size(ctx, v); err != nil || n != 0 {
					t.Fatalf("the new board of %d shards: size %d, %v", next, n, err)
				}
				if r := mustSubmit(t, s, lb.Submission{Board: id, Player: "old1", Score: 1, EventID: "e1"}); r.Duplicate ||
					r.PreviousScore != nil || r.Entry.Rank != 1 {
					t.Fatalf("old1 on the new board: %+v", r)
				}
			}
			mine := map[string]bool{}
			for i := range max(next, 1) {
				mine[lb.ShardKeyBase(s.Prefix(), id, i, max(next, 1))] = next > 0
			}
			for i := range shards {
				base := lb.ShardKeyBase(s.Prefix(), id, i, shards)
				if mine[base] {
					continue
				}
				if keys := shardKeys(t, rdb, base); len(keys) > 0 {
					t.Fatalf("then %d: %d keys of the old board's shard %d left, e.g. %v", next, len(keys), i,
						keys[:min(4, len(keys))])
				}
			}
		})
	}
}
