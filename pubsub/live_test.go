package pubsub

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/livelist"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// nextEntry waits for a rank update.
func nextEntry(t *testing.T, ch <-chan *leaderboard.Entry, within time.Duration) *leaderboard.Entry {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("rank channel closed")
		}
		return e
	case <-time.After(within):
		t.Fatal("no rank update")
	}
	return nil
}

func TestRankUpdates(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "r"})
	ctx := t.Context()
	v := leaderboard.View{Board: "r"}
	ch, err := h.SubscribeRank(ctx, v, "me")
	if err != nil {
		t.Fatal(err)
	}
	// No score yet: the first message says so (rank 0), then nothing until the player gets one (the next
	// message is the score; anything before it would be caught here).
	if e := nextEntry(t, ch, time.Second); e.Rank != 0 || e.PlayerID != "me" {
		t.Fatalf("first message for a player without a score: %+v", e)
	}
	submit(t, st, "r", "me", 10)
	if e := nextEntry(t, ch, time.Second); e.Rank != 1 || e.Score != 10 {
		t.Fatalf("got %+v, want rank 1 score 10", e)
	}
	submit(t, st, "r", "other", 20) // overtaken by somebody else
	if e := nextEntry(t, ch, time.Second); e.Rank != 2 || e.Score != 10 {
		t.Fatalf("got %+v, want rank 2 score 10", e)
	}
	submit(t, st, "r", "me", 30)
	if e := nextEntry(t, ch, time.Second); e.Rank != 1 || e.Score != 30 {
		t.Fatalf("got %+v, want rank 1 score 30", e)
	}
	submit(t, st, "r", "me", 5) // BEST: not an improvement, nothing changes and nothing is sent...
	submit(t, st, "r", "rival", 40)
	if e := nextEntry(t, ch, time.Second); e.Rank != 2 || e.Score != 30 { // ...so the next message is this one
		t.Fatalf("got %+v, want rank 2 score 30", e)
	}
	if _, err := st.RemovePlayer(ctx, "r", "rival"); err != nil {
		t.Fatal(err)
	}
	if e := nextEntry(t, ch, time.Second); e.Rank != 1 || e.Score != 30 {
		t.Fatalf("got %+v, want rank 1 score 30", e)
	}

	// Far below the top (where only the watch key makes the scripts publish): overtaken from below.
	var subs []leaderboard.Submission
	for i := range 150 {
		subs = append(subs, leaderboard.Submission{Board: "r", Player: fmt.Sprintf("x%03d", i),
			Score: float64(1000 - i)})
	}
	if _, err := st.SubmitMany(ctx, subs); err != nil {
		t.Fatal(err)
	}
	e := nextEntry(t, ch, time.Second)
	for e.Rank != 151 { // updates are coalesced: wait for the settled rank
		e = nextEntry(t, ch, time.Second)
	}
	submit(t, st, "r", "late", 31) // arrives at rank 151, pushing me to 152
	if e := nextEntry(t, ch, time.Second); e.Rank != 152 {
		t.Fatalf("got %+v, want rank 152 after an arrival above", e)
	}
	if _, err := st.RemovePlayer(ctx, "r", "x000"); err != nil { // a removal above moves me up
		t.Fatal(err)
	}
	if e := nextEntry(t, ch, time.Second); e.Rank != 151 {
		t.Fatalf("got %+v, want rank 151 after a removal above", e)
	}
	if _, err := st.RemovePlayer(ctx, "r", "me"); err != nil {
		t.Fatal(err)
	}
	if e := nextEntry(t, ch, time.Second); e.Rank != 0 || e.PlayerID != "me" {
		t.Fatalf("got %+v, want rank 0 (no score any more)", e)
	}
	if w, err := st.Watched(ctx, "r"); err != nil || !w {
		t.Fatalf("watched = %v, %v; want true", w, err)
	}
}

func TestTwoHubsOneRedis(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, srv.Client(t), prefix)
	b := newStore(t, srv.Client(t), prefix)
	startHub(t, a, Config{})
	hb := startHub(t, b, Config{})
	createBoard(t, a, leaderboard.Board{ID: "two"})
	c := follow(must(hb.SubscribeTop(t.Context(), leaderboard.View{Board: "two"}, 10)))
	rc, err := hb.SubscribeRank(t.Context(), leaderboard.View{Board: "two"}, "p1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		submit(t, a, "two", fmt.Sprintf("p%d", i), float64(i))
	}
	waitTop(t, c, b, leaderboard.View{Board: "two"}, 2*time.Second)
	e := nextEntry(t, rc, time.Second)
	for e.Rank != 19 {
		e = nextEntry(t, rc, time.Second)
	}
}

func must(ch <-chan *TopUpdate, err error) (<-chan *TopUpdate, int) {
	if err != nil {
		panic(err)
	}
	return ch, 10
}

// TestRedisRestart: subscriptions survive a Redis restart and every subscriber gets a fresh snapshot.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Standalone(t)
	st := newStore(t, srv.Client(t), redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "rs"})
	v := leaderboard.View{Board: "rs"}
	for i := range 15 {
		submit(t, st, "rs", fmt.Sprintf("p%d", i), float64(i))
	}
	var clients []*topClient
	for range 100 {
		clients = append(clients, follow(must(h.SubscribeTop(t.Context(), v, 10))))
	}
	for _, c := range clients {
		waitTop(t, c, st, v, 2*time.Second)
	}
	srv.Stop()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted Redis is empty; the store still knows the board definition.
	createBoard(t, st, leaderboard.Board{ID: "rs"})
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		_, err := st.Submit(t.Context(), leaderboard.Submission{Board: "rs", Player: "after", Score: 7})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	submit(t, st, "rs", "after2", 8)
	for _, c := range clients {
		waitTop(t, c, st, v, 5*time.Second)
		if l, ver, snaps, _ := c.state(); snaps < 2 {
			t.Logf("list %v ver %d", l, ver)
			t.Fatalf("a subscriber got %d snapshots, want a fresh one after the restart", snaps)
		}
	}
}

// TestSlowConsumer: a subscriber that stops reading delays nobody, holds at most QueueSize updates, and is
// dropped after StuckAfter; one that reads slowly gets merged diffs without version gaps and converges.
func TestSlowConsumer(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{StuckAfter: 400 * time.Millisecond, MaxUpdateRate: 50})
	createBoard(t, st, leaderboard.Board{ID: "slow"})
	v := leaderboard.View{Board: "slow"}
	ctx := t.Context()
	stuck, err := h.SubscribeTop(ctx, v, 10) // never read until the end
	if err != nil {
		t.Fatal(err)
	}
	slowCh, err := h.SubscribeTop(ctx, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	slow := &topClient{first: 10, done: make(chan struct{})}
	merged := atomic.Int64{}
	go func() { // reads one update every 100 ms while updates come every 20 ms
		defer close(slow.done)
		for u := range slowCh {
			slow.mu.Lock()
			if u.Version != slow.ver+1 && slow.err == nil {
				slow.err = fmt.Errorf("version %d after %d", u.Version, slow.ver)
			}
			if !u.Snapshot && len(u.Entries)+len(u.Removed) > 2 {
				merged.Add(1)
			}
			slow.ver = u.Version
			slow.size = u.Size
			slow.list = livelist.Apply(slow.list, u.Snapshot, u.Entries, u.Removed, 10)
			slow.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var fast []*topClient
	for range 20 {
		fast = append(fast, follow(must(h.SubscribeTop(ctx, v, 10))))
	}
	for i := range 100 {
		submit(t, st, "slow", fmt.Sprintf("p%d", i%30), float64(i))
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range fast {
		waitTop(t, c, st, v, time.Second)
	}
	waitTop(t, slow, st, v, 3*time.Second)
	// The stuck one has been dropped: its channel holds at most one update and is closed.
	n := 0
	timeout := time.After(2 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-stuck:
			if open {
				n++
			}
		case <-timeout:
			t.Fatal("stuck subscriber was not dropped")
		}
	}
	if n > 1 {
		t.Fatalf("stuck subscriber held %d updates, want at most 1", n)
	}
	// The slow reader got the same final list from far fewer updates: merged diffs (or snapshots) replaced the
	// ones it could not take in time.
	_, fastVer, _, _ := fast[0].state()
	_, slowVer, _, _ := slow.state()
	if merged.Load() == 0 || slowVer*2 > fastVer {
		t.Fatalf("slow reader: %d updates (%d merged) for the fast readers' %d", slowVer, merged.Load(), fastVer)
	}
	// The hub's counts say so: the stuck one dropped, updates taken back from both, one snapshot per subscriber
	// at least, and at least the fast readers' diffs.
	st2 := h.Stats()
	if st2.StuckDropped != 1 || st2.Replaced == 0 || st2.Snapshots < 22 || st2.Diffs < uint64(20*(fastVer-1)) {
		t.Fatalf("hub stats %+v (fast readers at version %d)", st2, fastVer)
	}
}

// TestNoGoroutineLeak: 1,000 subscribe/unsubscribe cycles leave the goroutine count at its baseline.
func TestNoGoroutineLeak(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "g", Windows: []leaderboard.Window{leaderboard.AllTime,
		leaderboard.Daily}})
	submit(t, st, "g", "p", 1)
	v := leaderboard.View{Board: "g"}
	// Warm up: the process-wide Redis connection and its reader stay.
	ctx, cancel := context.WithCancel(t.Context())
	ch, _ := must(h.SubscribeTop(ctx, v, 10))
	<-ch
	cancel()
	settle := func(limit int) int {
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && n > limit; {
			time.Sleep(20 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		return n
	}
	time.Sleep(300 * time.Millisecond) // the warm-up board's goroutine ends
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			w := leaderboard.View{Board: "g", Window: []leaderboard.Window{leaderboard.AllTime,
				leaderboard.Daily}[i%2]}
			if i%3 == 0 {
				if _, err := h.SubscribeRank(ctx, w, fmt.Sprintf("p%d", i%7)); err != nil {
					t.Error(err)
				}
				return
			}
			c, err := h.SubscribeTop(ctx, w, 1+i%100)
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				<-c
			}
		}()
		if i%50 == 0 {
			wg.Wait()
		}
	}
	wg.Wait()
	if n := settle(base); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after 1000 cycles, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestClusterShards: boards on different cluster shards all deliver their events.
func TestClusterShards(t *testing.T) {
	cl := redistest.SharedCluster(t)
	st := newStore(t, cl.Client(t), redistest.Prefix(t))
	h := startHub(t, st, Config{})
	// One board per third of the slot space: the test cluster's three masters each own one third.
	var ids []string
	seen := map[int]bool{}
	for i := 0; len(ids) < 3; i++ {
		id := fmt.Sprintf("shard%d", i)
		if third := leaderboard.HashSlot(st.Channel(id)) * 3 / 16384; !seen[third] {
			seen[third] = true
			ids = append(ids, id)
		}
	}
	var clients []*topClient
	for _, id := range ids {
		createBoard(t, st, leaderboard.Board{ID: id})
		clients = append(clients, follow(must(h.SubscribeTop(t.Context(), leaderboard.View{Board: id}, 10))))
	}
	// Each board's snapshot first: read after the submissions (the hub reads when it gets to it, late on a loaded
	// machine), it would already hold them, and no event would be left to deliver (make test saw that once).
	for i, c := range clients {
		select {
		case <-c.head:
		case <-time.After(5 * time.Second):
			t.Fatalf("board %s: no snapshot", ids[i])
		}
	}
	for i := range 30 {
		submit(t, st, ids[i%3], fmt.Sprintf("p%d", i), float64(i))
	}
	for i, c := range clients {
		waitTop(t, c, st, leaderboard.View{Board: ids[i]}, 3*time.Second)
		if _, ver, _, _ := c.state(); ver < 2 {
			t.Fatalf("board %s: only the snapshot arrived (version %d)", ids[i], ver)
		}
	}
	h.listenMu.Lock()
	n := len(h.conns)
	h.listenMu.Unlock()
	if n != 3 {
		t.Fatalf("%d subscription connections, want one per primary (3)", n)
	}
}

// TestPeriodRollover: a subscription without a period follows the current one and gets a snapshot of the new
// period at the rollover.
func TestPeriodRollover(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC).UnixNano())
	st := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t),
		Clock: func() time.Time { return time.Unix(0, now.Load()) }})
	h := startHub(t, st, Config{PeriodCheck: 20 * time.Millisecond})
	createBoard(t, st, leaderboard.Board{ID: "day", Windows: []leaderboard.Window{leaderboard.Daily}})
	v := leaderboard.View{Board: "day"}
	ch, err := h.SubscribeTop(t.Context(), v, 10)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := h.SubscribeRank(t.Context(), v, "a")
	if err != nil {
		t.Fatal(err)
	}
	submit(t, st, "day", "a", 5)
	// The subscription's first entry may be "no score yet" (rank 0), read before the submission.
	for e := nextEntry(t, rc, time.Second); e.Rank != 1; e = nextEntry(t, rc, time.Second) {
		if e.Rank != 0 {
			t.Fatalf("got %+v", e)
		}
	}
	var last *TopUpdate
	for last == nil || len(last.Entries) == 0 {
		select {
		case last = <-ch:
		case <-time.After(2 * time.Second):
			t.Fatal("no update")
		}
	}
	if last.Period != "2026-11-29" {
		t.Fatalf("period %q", last.Period)
	}
	now.Store(time.Date(2026, 11, 30, 0, 0, 1, 0, time.UTC).UnixNano())
	select {
	case u := <-ch:
		if !u.Snapshot || u.Period != "2026-11-30" || len(u.Entries) != 0 || u.Version != last.Version+1 {
			t.Fatalf("got %+v, want an empty snapshot of 2026-11-30 with version %d", u, last.Version+1)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no snapshot after the rollover")
	}
	if e := nextEntry(t, rc, time.Second); e.Rank != 0 {
		t.Fatalf("got %+v, want rank 0 in the new period", e)
	}
	submit(t, st, "day", "b", 9)
	select {
	case u := <-ch:
		if u.Period != "2026-11-30" || len(u.Entries) != 1 || u.Entries[0].PlayerID != "b" {
			t.Fatalf("got %+v", u)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no update in the new period")
	}
}
