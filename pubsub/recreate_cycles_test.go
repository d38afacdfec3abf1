package pubsub

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Many deletions and re-creations (1 <-> 3 shards) of a watched board through another store: every old
// subscription ends as deleted, every new one gets its snapshot, and once the last subscription has gone the hub
// holds no board, view or channel of it and runs no more goroutines than before the cycles.
func TestRecreateCyclesLeaveNothingBehind(t *testing.T) {
	srv := redistest.Standalone(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, srv.Client(t), prefix)
	hubClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = hubClient.Close() })
	h := startHub(t, newStore(t, hubClient, prefix), Config{})
	const id = "cycles"
	v := leaderboard.View{Board: id}
	createBoard(t, a, leaderboard.Board{ID: id})
	submit(t, a, id, "p0", 1)

	// Warm up (the hub's connection and reader), then count.
	wctx, wcancel := context.WithCancel(t.Context())
	wc := follow(must(h.SubscribeTop(wctx, v, 10)))
	waitTop(t, wc, a, v, 5*time.Second)
	wcancel()
	closedWithin(t, wc.done, 5*time.Second, "the warm-up subscription")
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()

	const cycles = 25
	for i := range cycles {
		end, rankEnd := new(Ending), new(Ending)
		ctx, cancel := context.WithCancel(WithEnding(t.Context(), end))
		c := follow(must(h.SubscribeTop(ctx, v, 10)))
		rc, err := h.SubscribeRank(WithEnding(ctx, rankEnd), v, "p0")
		if err != nil {
			t.Fatal(err)
		}
		waitTop(t, c, a, v, 5*time.Second)
		nextEntry(t, rc, 5*time.Second)
		if _, err := h.Top(context.Background(), v, 0, 10); err != nil { // and a cached view
			t.Fatal(err)
		}
		if ok, err := a.DeleteBoard(context.Background(), id); err != nil || !ok {
			t.Fatalf("cycle %d: DeleteBoard: %v %v", i, ok, err)
		}
		shards := 1
		if i%2 == 0 {
			shards = 3
		}
		createBoard(t, a, leaderboard.Board{ID: id, Shards: shards})
		submit(t, a, id, "p0", float64(i))
		closedWithin(t, c.done, 10*time.Second, fmt.Sprintf("cycle %d: the old topUpdates subscription", i))
		closedWithin(t, rc, 10*time.Second, fmt.Sprintf("cycle %d: the old rankUpdates subscription", i))
		if !end.Deleted() || !rankEnd.Deleted() {
			t.Fatalf("cycle %d: ended by the deletion: top %v, rank %v", i, end.Deleted(), rankEnd.Deleted())
		}
		cancel()
	}
	// A last subscription follows the board as it is now, then leaves.
	ctx, cancel := context.WithCancel(t.Context())
	c := follow(must(h.SubscribeTop(ctx, v, 10)))
	waitTop(t, c, a, v, 5*time.Second)
	cancel()
	closedWithin(t, c.done, 5*time.Second, "the last subscription")

	// Cached views are dropped after their idle time; wait for the hub to let go of everything it can.
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.RLock()
		boards, views, chans := len(h.boards), len(h.views), len(h.byChannel)
		h.mu.RUnlock()
		h.listenMu.Lock()
		listened := 0
		for _, lc := range h.conns {
			listened += len(lc.channels())
		}
		h.listenMu.Unlock()
		n := runtime.NumGoroutine()
		// The board of the last cached view may stay (Top keeps CacheSize views): at most one board, its channels.
		if boards <= 1 && views <= 1 && chans <= 3 && listened <= 3 && n <= before+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("after %d cycles: %d boards, %d views, %d channels mapped, %d listened, %d goroutines (%d "+
				"before)\n%s", cycles, boards, views, chans, listened, n, before, buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
