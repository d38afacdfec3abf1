package pubsub

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// countEvals counts script calls (every read of a top list is one).
type countEvals struct{ n atomic.Int64 }

func (c *countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestTopCacheHitsSkipRedis: once a view is cached and no change is pending, Top sends nothing to Redis, and a
// write makes it serve the new list.
func TestTopCacheHitsSkipRedis(t *testing.T) {
	counter := &countEvals{}
	st := hookedStore(t, counter)
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "c"})
	for i := range 30 {
		submit(t, st, "c", fmt.Sprintf("p%d", i), float64(i))
	}
	ctx := t.Context()
	v := leaderboard.View{Board: "c"}
	if _, err := h.Top(ctx, v, 0, 10); err != nil { // a miss: starts caching
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "view cached", func() bool { _, ok := h.TopToken(ctx, v, 0, 10); return ok })
	before := counter.n.Load()
	for range 1000 {
		p, err := h.Top(ctx, v, 0, 10)
		if err != nil || len(p.Entries) != 10 || p.Entries[0].PlayerID != "p29" || p.Size != 30 {
			t.Fatalf("Top = %+v, %v", p, err)
		}
	}
	if n := counter.n.Load() - before; n > 2 {
		t.Fatalf("%d Redis commands for 1000 cached Top calls", n)
	}
	submit(t, st, "c", "new", 100)
	deadline := time.Now().Add(time.Second)
	for {
		p, err := h.Top(ctx, v, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.Entries[0].PlayerID == "new" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Top did not show the new leader")
		}
	}
	// Beyond the cached range Top reads the store.
	p, err := h.Top(ctx, v, 95, 10)
	if err != nil || len(p.Entries) != 0 {
		t.Fatalf("Top beyond the list = %+v, %v", p, err)
	}
}

// TestPlainPublish: with PUBLISH (the embedded in-memory Redis of `make run`) the hub subscribes with SUBSCRIBE.
func TestPlainPublish(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := leaderboard.New(rdb, leaderboard.Config{PublishCommand: leaderboard.PublishPlain})
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "m"})
	c := follow(must(h.SubscribeTop(t.Context(), leaderboard.View{Board: "m"}, 10)))
	for i := range 12 {
		submit(t, st, "m", fmt.Sprintf("p%d", i), float64(i))
	}
	waitTop(t, c, st, leaderboard.View{Board: "m"}, 3*time.Second)
}

// TestNoPublish: with PublishNone the hub polls at MaxUpdateRate while anybody watches.
func TestNoPublish(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t), PublishCommand: leaderboard.PublishNone})
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "n"})
	c := follow(must(h.SubscribeTop(t.Context(), leaderboard.View{Board: "n"}, 10)))
	for i := range 12 {
		submit(t, st, "n", fmt.Sprintf("p%d", i), float64(i))
	}
	waitTop(t, c, st, leaderboard.View{Board: "n"}, 3*time.Second)
}

// TestVersionGap: an event whose version skips one (a lost message) makes the hub re-read every view.
func TestVersionGap(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	prefix := redistest.Prefix(t)
	st := newStore(t, rdb, prefix)
	silent := leaderboard.New(rdb, leaderboard.Config{Prefix: prefix, PublishCommand: leaderboard.PublishNone})
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "gap"})
	v := leaderboard.View{Board: "gap"}
	c := follow(must(h.SubscribeTop(t.Context(), v, 10)))
	submit(t, st, "gap", "a", 1) // event version 1
	waitTop(t, c, st, v, 2*time.Second)
	h.mu.RLock()
	b := h.boards["gap"]
	h.mu.RUnlock()
	settled := func(ver int64) func() bool {
		return func() bool {
			b.inMu.Lock()
			idle := len(b.msgs) == 0 && !b.all && !b.dirty.Load()
			b.inMu.Unlock()
			b.mu.Lock()
			defer b.mu.Unlock()
			return idle && b.confirmed.Load() && b.lastVer == ver
		}
	}
	waitFor(t, 2*time.Second, "the hub has read everything", settled(1))
	submit(t, silent, "gap", "b", 2) // a write whose event is "lost"
	epoch, ver, err := st.EventVersion(t.Context(), "gap")
	if err != nil || ver != 1 {
		t.Fatalf("event version %q %d %v", epoch, ver, err)
	}
	// The next event, for another window period, in sequence: the hub takes it without re-reading this view...
	if err := rdb.SPublish(t.Context(), st.Channel("gap"), `{"e":"`+epoch+`","v":2,"c":[["d","2000-01-01","x",0,1]]}`).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the hub has taken event 2", settled(2))
	if got, _, _, _ := c.state(); len(got) != 1 {
		t.Fatalf("the silent write showed up without an event: %v", got)
	}
	// ...and an event with a version that skips one makes it re-read everything.
	if err := rdb.SPublish(t.Context(), st.Channel("gap"), `{"e":"`+epoch+`","v":4,"c":[["d","2000-01-01","x",0,1]]}`).Err(); err != nil {
		t.Fatal(err)
	}
	waitTop(t, c, st, v, 2*time.Second)
}
