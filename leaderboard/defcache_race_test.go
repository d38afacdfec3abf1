package leaderboard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// holdReply is a hook that, once armed, holds the reply of the next GET until released.
type holdReply struct {
	mu       sync.Mutex
	armed    bool
	got      chan struct{}
	released chan struct{}
}

func (h *holdReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		hold := h.armed && cmd.Name() == "get"
		if hold {
			h.armed = false
		}
		h.mu.Unlock()
		if hold {
			close(h.got)
			<-h.released
		}
		return err
	}
}

// A board's definition read from Redis just before the board is deleted and created again, and cached only after
// the store forgot the id (as the hub makes it at the deletion notice), must not stay cached: the store then
// refused reads of the new board's windows for good ("has no DAILY window"; no script runs to find it stale).
func TestDefinitionReadBeforeAForgetIsNotCached(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t).(*redis.Client)
	prefix := redistest.Prefix(t)
	opts := *rdb.Options()
	held := redis.NewClient(&opts)
	t.Cleanup(func() { held.Close() })
	h := &holdReply{got: make(chan struct{}), released: make(chan struct{})}
	held.AddHook(h)
	ctx := context.Background()
	w := lb.New(rdb, lb.Config{Prefix: prefix})
	r := lb.New(held, lb.Config{Prefix: prefix})
	if _, err := w.CreateBoard(ctx, lb.Board{ID: "dc"}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := r.Board(ctx, "dc"); done <- err }()
	select {
	case <-h.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the definition was not read")
	}
	if _, err := w.DeleteBoard(ctx, "dc"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateBoard(ctx, lb.Board{ID: "dc", Windows: []lb.Window{lb.AllTime, lb.Daily}}); err != nil {
		t.Fatal(err)
	}
	r.Forget("dc") // the deletion notice
	close(h.released)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, lb.View{Board: "dc", Window: lb.Daily}); err != nil {
		t.Fatalf("a read of the new board's DAILY window: %v", err)
	}
}
