package pubsub

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// hubHolds reports how many board objects the hub keeps and how many channels its connections listen to.
func hubHolds(h *Hub) (boards, listened int) {
	h.mu.RLock()
	boards = len(h.boards)
	h.mu.RUnlock()
	h.listenMu.Lock()
	for _, lc := range h.conns {
		listened += len(lc.channels())
	}
	h.listenMu.Unlock()
	return boards, listened
}

func feedBoards(f *CloseFeed) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boards)
}

// waitReleased waits (10 s at most) until the feed follows no board, the hub keeps no board object and listens to
// no channel, and the goroutines are back to before (a couple more allowed: the runtime's own).
func waitReleased(t *testing.T, h *Hub, f *CloseFeed, before int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		boards, listened := hubHolds(h)
		fb := feedBoards(f)
		n := runtime.NumGoroutine()
		if boards == 0 && listened == 0 && fb == 0 && n <= before+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%s: hub boards %d, listened %d, feed boards %d, goroutines %d (%d before)\n%s", what, boards,
				listened, fb, n, before, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Many periodClosed subscriptions made and ended at once, on one board and on several, some of them joining a
// feed that another is starting or stopping: once they have all ended, the feed follows nothing, the hub lets go
// of the board objects the feed's deletion watches kept (and their channels), and no goroutine is left.
func TestCloseFeedChurnReleasesEverything(t *testing.T) {
	srv := redistest.Standalone(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, srv.Client(t), prefix)
	hubClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = hubClient.Close() })
	h := startHub(t, newStore(t, hubClient, prefix), Config{})
	f := NewCloseFeed(newStore(t, srv.Client(t), prefix), h, 10*time.Millisecond, nil)
	const boards = 6
	for i := range boards {
		createBoard(t, a, leaderboard.Board{ID: fmt.Sprintf("churn%d", i),
			Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}})
	}
	// Warm up the hub's connection and reader, then count.
	wctx, wcancel := context.WithCancel(t.Context())
	if _, err := f.Subscribe(wctx, "churn0"); err != nil {
		t.Fatal(err)
	}
	wcancel()
	before := runtime.NumGoroutine()
	waitReleased(t, h, f, before, "after the warm-up")
	before = runtime.NumGoroutine()

	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				board := "churn0" // half on one board
				if w%2 == 1 {
					board = fmt.Sprintf("churn%d", (w+i)%boards)
				}
				ctx, cancel := context.WithCancel(t.Context())
				ch, err := f.Subscribe(ctx, board)
				if err != nil {
					cancel()
					t.Errorf("subscribe %s: %v", board, err)
					return
				}
				if i%3 == 0 {
					runtime.Gosched()
				}
				cancel()
				select {
				case _, open := <-ch:
					for open {
						_, open = <-ch
					}
				case <-time.After(5 * time.Second):
					t.Errorf("subscription of %s not closed 5 s after its end", board)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	waitReleased(t, h, f, before, "after the churn")

	// The watches still work: a subscription of a board deleted now ends as deleted.
	end := new(Ending)
	ch, err := f.Subscribe(WithEnding(t.Context(), end), "churn1")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.DeleteBoard(context.Background(), "churn1"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	endedAsDeleted(t, ch, end)
	waitReleased(t, h, f, before, "after the deletion")
}

// At the hub's shutdown the close subscriptions end, not as deleted, and nothing is left running.
func TestCloseFeedHubShutdownEndsSubscriptions(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, rdb, prefix)
	before := runtime.NumGoroutine()
	h := New(newStore(t, rdb, prefix), Config{})
	hctx, hcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(hctx) }()
	f := NewCloseFeed(newStore(t, rdb, prefix), h, 10*time.Millisecond, nil)
	type sub struct {
		ch  <-chan leaderboard.CloseEvent
		end *Ending
	}
	var subs []sub
	for i := range 4 {
		id := fmt.Sprintf("shut%d", i)
		createBoard(t, a, leaderboard.Board{ID: id, Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}})
		for range 3 {
			end := new(Ending)
			ch, err := f.Subscribe(WithEnding(t.Context(), end), id)
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, sub{ch, end})
		}
	}
	hcancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not stop")
	}
	for i, s := range subs {
		closedWithin(t, s.ch, 5*time.Second, fmt.Sprintf("subscription %d", i))
		if s.end.Deleted() {
			t.Fatalf("subscription %d ended as deleted at shutdown", i)
		}
	}
	waitFor(t, 10*time.Second, "the feed following nothing and the goroutines back", func() bool {
		return feedBoards(f) == 0 && runtime.NumGoroutine() <= before+2
	})
	if _, err := f.Subscribe(t.Context(), "shut0"); leaderboard.ErrorCode(err) != leaderboard.Unavailable {
		t.Fatalf("subscribing after the shutdown: %v, want UNAVAILABLE", err)
	}
}

// The hub's pub/sub connection killed (CLIENT KILL TYPE pubsub) while a close subscription lasts: it keeps
// getting close events, and the board's deletion afterwards still ends it as deleted through the notice (the
// feed's poll is an hour: only the notice can end it).
func TestCloseFeedSurvivesPubSubKill(t *testing.T) {
	srv := redistest.Standalone(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, srv.Client(t), prefix)
	h := startHub(t, newStore(t, srv.Client(t), prefix), Config{})
	fast := NewCloseFeed(newStore(t, srv.Client(t), prefix), h, 10*time.Millisecond, nil)
	slow := NewCloseFeed(newStore(t, srv.Client(t), prefix), h, time.Hour, nil)
	ctx := context.Background()
	const id = "killed"
	createBoard(t, a, leaderboard.Board{ID: id, Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}})
	fastEnd, slowEnd := new(Ending), new(Ending)
	fch, err := fast.Subscribe(WithEnding(t.Context(), fastEnd), id)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := slow.Subscribe(WithEnding(t.Context(), slowEnd), id)
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client(t)
	ch := a.Channel(id)
	subscribed := func() bool {
		n, err := rdb.PubSubShardNumSub(ctx, ch).Result()
		if err == nil && n[ch] > 0 {
			return true
		}
		m, err := rdb.PubSubNumSub(ctx, ch).Result()
		return err == nil && m[ch] > 0
	}
	waitFor(t, 10*time.Second, "the hub listening to the board's channel", subscribed)
	for round := range 2 {
		killed, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
		if err != nil || killed == 0 {
			t.Fatalf("CLIENT KILL TYPE pubsub: %d %v", killed, err)
		}
		waitFor(t, 15*time.Second, "the hub listening again", subscribed)
		period := fmt.Sprintf("s%d", round)
		oid, recorded, err := a.RecordClose(ctx, id, leaderboard.Season, period, a.Now())
		if err != nil || !recorded {
			t.Fatalf("record: %v %v", recorded, err)
		}
		select {
		case ev, open := <-fch:
			if !open || ev.OutboxID != oid {
				t.Fatalf("round %d: got %+v (open %v), want %s", round, ev, open, oid)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: no close event after the reconnection", round)
		}
	}
	if ok, err := a.DeleteBoard(ctx, id); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	endedAsDeleted(t, sch, slowEnd)
	endedAsDeleted(t, fch, fastEnd)
}

// pausedConns is a dialer whose connections deliver nothing read from Redis while paused (what the server sent
// waits in the socket): a hub's pub/sub reader that lags behind.
type pausedConns struct {
	mu     sync.Mutex
	paused chan struct{} // nil: not paused; closed on resume
}

func (p *pausedConns) pause() {
	p.mu.Lock()
	p.paused = make(chan struct{})
	p.mu.Unlock()
}

func (p *pausedConns) resume() {
	p.mu.Lock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
	p.mu.Unlock()
}

func (p *pausedConns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &pausedConn{Conn: c, p: p}, nil
}

type pausedConn struct {
	net.Conn
	p *pausedConns
}

// Read holds what it read while paused (a read that was waiting when the pause began included).
func (c *pausedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.mu.Lock()
	wait := c.p.paused
	c.p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return n, err
}

// A board deleted and created again with the same definition through another server, and the new board closes a
// period, while the hub's reader lags (the deletion notice has not reached it) and the feed's polls run: the old
// subscription must get none of the new board's close events, and ends as deleted once the notice arrives.
//
// The feed's poll tells the board created again by its creation mark (leaderboard.BoardMark, read with the events) and
// ends the subscription as deleted before the notice arrives. Before the mark, the old subscription got the new
// board's s1: the definition is the same and the hub had no notice yet.
func TestCloseFeedRecreatedWhileNoticeLags(t *testing.T) {
	addr := redistest.SharedStandalone(t).Addr
	prefix := redistest.Prefix(t)
	a := newStore(t, redistest.SharedStandalone(t).Client(t), prefix)
	pc := &pausedConns{}
	hubClient := redis.NewClient(&redis.Options{Addr: addr, Dialer: pc.dial})
	t.Cleanup(func() { pc.resume(); _ = hubClient.Close() })
	feedClient := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = feedClient.Close() })
	g := redistest.NewGate()
	feedClient.AddHook(g)
	var polls atomic.Int64 // the feed's reads of outboxes
	feedClient.AddHook(redistest.Commands{See: func(c redis.Cmder) {
		if c.Name() == "xrange" {
			polls.Add(1)
		}
	}})
	h := startHub(t, newStore(t, hubClient, prefix), Config{})
	t.Cleanup(pc.resume) // before the hub's stop (cleanups run last first)
	f := NewCloseFeed(newStore(t, feedClient, prefix), h, 10*time.Millisecond, nil)
	ctx := context.Background()
	const id = "lag"
	def := leaderboard.Board{ID: id, Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}}
	createBoard(t, a, def)
	end := new(Ending)
	old, err := f.Subscribe(WithEnding(t.Context(), end), id)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.SharedStandalone(t).Client(t)
	ch := a.Channel(id)
	waitFor(t, 10*time.Second, "the hub listening to the board's channel", func() bool {
		n, err := rdb.PubSubShardNumSub(ctx, ch).Result()
		return err == nil && n[ch] > 0
	})
	if _, recorded, err := a.RecordClose(ctx, id, leaderboard.Season, "s0", a.Now()); err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	select {
	case ev := <-old:
		if ev.Period != "s0" {
			t.Fatalf("event %+v, want s0", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event of the board")
	}

	pc.pause()
	g.Shut()
	if ok, err := a.DeleteBoard(ctx, id); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	createBoard(t, a, def)
	if _, recorded, err := a.RecordClose(ctx, id, leaderboard.Season, "s1", a.Now()); err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	polled := polls.Load()
	g.Release()
	// The feed polls the new board's outbox while the notice waits (the hub's reads are held): the poll alone
	// must end the subscription, as deleted, without the new board's event.
	endedAsDeleted(t, old, end)
	if polls.Load() == polled {
		t.Fatal("the subscription ended without a poll of the outbox")
	}
	pc.resume()
}
