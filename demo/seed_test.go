package demo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/demo"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// seedCalls records, for the script calls that carry at least 90 items (a seed call carries 100, about 11
// arguments each; the test's rate of 100 submissions/s, spread over three boards, keeps a simulated tick's call on
// one board far below that even after a stall of a second), how many arguments each had and when it ran.
type seedCalls struct {
	mu    sync.Mutex
	calls []seedCall
}

type seedCall struct {
	args       int
	start, end time.Time
}

func (s *seedCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *seedCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *seedCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		a := cmd.Args()
		if len(a) > 90*11 && strings.HasSuffix(fmt.Sprint(a[1]), "_submit") {
			s.mu.Lock()
			s.calls = append(s.calls, seedCall{args: len(a), start: start, end: time.Now()})
			s.mu.Unlock()
		}
		return err
	}
}

// The world board is seeded 100 players per call, and each seed call waits at least as long as the one before it
// took: the seeding takes at most half of the store's time, so that a store that runs one command at a time (the
// embedded one) keeps answering its other clients (TestDemoSeedsTheEmbeddedStoreQuietly, internal/server).
func TestSeedingLeavesTheStoreHalfItsTime(t *testing.T) {
	t.Parallel()
	rdb := redistest.SharedStandalone(t).Client(t)
	calls := &seedCalls{}
	rdb.AddHook(calls)
	store := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t)})
	cfg := smallConfig()
	cfg.Players = 1000
	cfg.Rate = 100 // a tick carries at most a second's worth: 100 items over three boards
	start(t, store, cfg)
	ctx := context.Background()
	// The hook records a call once its reply is back, which can be after a read sees the board whole: wait for
	// both.
	eventually(t, 30*time.Second, "world board seeded", func() (bool, error) {
		n, err := size(ctx, store, leaderboard.View{Board: demo.WorldBoard})
		calls.mu.Lock()
		recorded := len(calls.calls)
		calls.mu.Unlock()
		return n == int64(cfg.Players) && recorded >= cfg.Players/100, err
	})
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if len(calls.calls) != cfg.Players/100 {
		t.Fatalf("%d seed calls, want %d of 100 players", len(calls.calls), cfg.Players/100)
	}
	for i, c := range calls.calls {
		if c.args != calls.calls[0].args {
			t.Errorf("seed call %d has %d arguments, the first %d: not 100 players each", i, c.args, calls.calls[0].args)
		}
		if i > 0 {
			prev := calls.calls[i-1]
			if gap, took := c.start.Sub(prev.end), prev.end.Sub(prev.start); gap < took {
				t.Errorf("seed call %d began %v after the one before, which took %v", i, gap, took)
			}
		}
	}
}
