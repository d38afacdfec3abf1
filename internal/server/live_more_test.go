package server

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// TestLiveRedisRestart: Redis restarted under 100 websocket subscriptions; they stay open, each gets a fresh
// snapshot after Redis is back, and all converge.
func TestLiveRedisRestart(t *testing.T) {
	srv := redistest.Standalone(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + srv.Addr
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "restart"})
	for i := range 12 {
		s.submit(t, map[string]any{"board": "restart", "playerId": fmt.Sprintf("p%d", i), "score": i})
	}
	lists := map[string]*liveList{}
	var conns []*wstest.Conn
	for c := range 4 {
		conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		conns = append(conns, conn)
		mine := map[string]*liveList{}
		for i := range 25 {
			id := fmt.Sprintf("%d-%d", c, i)
			mine[id] = &liveList{first: 10}
			lists[id] = mine[id]
		}
		pump(t, conn, mine)
		for id := range mine {
			if err := conn.Subscribe(id, topUpdatesSub, map[string]any{"b": "restart", "n": 10}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range lists {
		waitLive(t, s, l, "restart", 3*time.Second)
	}
	srv.Stop()
	time.Sleep(200 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted Redis is empty: define the board again and write (retrying while the server reconnects).
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.do(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": "restart"}})
		if len(r.Errors) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not recover: %+v", r.Errors)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.submit(t, map[string]any{"board": "restart", "playerId": "after", "score": 3})
	for _, l := range lists {
		waitLive(t, s, l, "restart", 5*time.Second)
		// The list may converge by a diff (the write's own refresh) before the server has noticed the lost
		// subscription connection; the fresh snapshot follows when it has.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			l.mu.Lock()
			snaps := l.snaps
			l.mu.Unlock()
			if snaps >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a subscriber got %d snapshots in 5 s, want a fresh one after the restart", snaps)
			}
		}
	}
	// Checked once every list has converged after the restart (Done stays closed once a connection ended), so
	// this covers the whole restart, not just the moment Redis came back.
	for _, conn := range conns {
		select {
		case <-conn.Done():
			t.Fatal("a websocket closed during the Redis restart")
		default:
		}
	}
}

// TestLiveSharedEncoding: subscribers of the same board with the same subscription share one rendering of each
// update (graph's shared path), and every one of them still rebuilds the exact list with gap-free versions.
func TestLiveSharedEncoding(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "shared"})
	const conns, perConn = 4, 15
	var all []*liveList
	for c := range conns {
		conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		lists := map[string]*liveList{}
		for i := range perConn {
			l := &liveList{first: 10}
			lists[fmt.Sprint(i)] = l
			all = append(all, l)
		}
		pump(t, conn, lists)
		for i := range perConn {
			if err := conn.Subscribe(fmt.Sprint(i), topUpdatesSub, map[string]any{"b": "shared", "n": 10}); err != nil {
				t.Fatalf("connection %d: %v", c, err)
			}
		}
	}
	for _, l := range all { // every subscriber has its snapshot before the writes start
		waitLive(t, s, l, "shared", 3*time.Second)
	}
	before := graph.SharedRenders()
	for i := range 30 {
		s.submit(t, map[string]any{"board": "shared", "playerId": fmt.Sprintf("p%d", i%12), "score": float64(i)})
		time.Sleep(20 * time.Millisecond)
	}
	delivered := 0
	for _, l := range all {
		waitLive(t, s, l, "shared", 3*time.Second)
		l.mu.Lock()
		delivered += l.ver - 1
		l.mu.Unlock()
	}
	renders := graph.SharedRenders() - before
	t.Logf("%d updates delivered to %d subscribers from %d renderings", delivered, len(all), renders)
	// Unshared, every delivered update would be a rendering of its own. Shared, a rendering reaches every
	// subscriber that is ready for it: 15 of the 60 on average when the writes are spaced out, fewer when the
	// machine is loaded and subscribers take two writes in one update (14.4 seen under make test), so the bound
	// is 4 subscribers a rendering.
	if renders == 0 || renders*4 > int64(delivered) {
		t.Fatalf("%d renderings for %d delivered updates: updates are not shared", renders, delivered)
	}
}

// TestLiveNoGoroutineLeak: subscribe/unsubscribe cycles over websockets leave the goroutine count at its
// baseline (server and client share this process).
func TestLiveNoGoroutineLeak(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "cycles"})
	s.submit(t, map[string]any{"board": "cycles", "playerId": "p", "score": 1})
	warm := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := warm.Subscribe("w", topUpdatesSub, map[string]any{"b": "cycles", "n": 10}); err != nil {
		t.Fatal(err)
	}
	warm.NextData(t, ctxT(t, 5*time.Second), "w", nil)
	warm.Close()
	<-warm.Done()
	// The baseline is taken once the server has seen the warm-up connection go (its gauge is back to 0), plus a
	// moment for that connection's goroutines to return: a baseline taken too early is too high and would hide
	// a leak.
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	base := runtime.NumGoroutine()

	const conns, perConn = 10, 100 // 1,000 subscribe/unsubscribe cycles
	start := time.Now()
	// Submissions all along, so that subscriptions are stopped while their streams are being written.
	stopSubmits := make(chan struct{})
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		for i := 0; ; i++ {
			select {
			case <-stopSubmits:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s.submit(t, map[string]any{"board": "cycles", "playerId": fmt.Sprintf("q%d", i%20), "score": float64(i)})
		}
	}()
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			defer conn.Close()
			ctx := ctxT(t, 30*time.Second)
			for i := range perConn {
				id := fmt.Sprintf("%d-%d", c, i)
				q, vars := topUpdatesSub, map[string]any{"b": "cycles", "n": 1 + i%100}
				if i%4 == 0 {
					q, vars = rankUpdatesSub, map[string]any{"b": "cycles", "p": "p"}
				}
				if err := conn.Subscribe(id, q, vars); err != nil {
					t.Error(err)
					return
				}
				for { // skip the server's "complete" for the previous id
					m, err := conn.Next(ctx)
					if err != nil || m.ID == id && !m.IsData() {
						t.Errorf("subscription %s: %+v %v", id, m, err)
						return
					}
					if m.ID == id {
						break
					}
				}
				if err := conn.Stop(id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stopSubmits)
	<-submitted
	t.Logf("cycles done after %v", time.Since(start))
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > base && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after %d cycles, baseline %d\n%s", n, conns*perConn, base,
			buf[:runtime.Stack(buf, true)])
	}
}
