package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// Many periodClosed subscribe/complete cycles over graphql-transport-ws and server-sent events, on one board and
// on several: afterwards the server listens to none of the boards' channels (the hub let go of the boards the
// close feed's deletion watches kept) and no goroutine is left.
func TestPeriodClosedChurnNoLeak(t *testing.T) {
	s := startServer(t, testConfig(t))
	const boards = 4
	for i := range boards {
		s.create(t, map[string]any{"id": fmt.Sprintf("pc-churn%d", i), "windows": []string{"DAILY"}})
	}
	rdb := redistest.SharedStandalone(t).Client(t)
	listened := func() int {
		n := 0
		for i := range boards {
			ch := s.Store.Channel(fmt.Sprintf("pc-churn%d", i))
			m, err := rdb.PubSubShardNumSub(context.Background(), ch).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += int(m[ch])
		}
		return n
	}
	warm := subscribeCloses(t, s, "pc-churn0")
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 1, 5*time.Second)
	warm.Close()
	<-warm.Done()
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 0, 5*time.Second)
	waitUntil(t, 5*time.Second, "no channel listened after the warm-up", func() bool { return listened() == 0 })
	time.Sleep(300 * time.Millisecond) // the warm-up connection's goroutines return
	base := runtime.NumGoroutine()

	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			defer func() { conn.Close(); <-conn.Done() }()
			for i := range 30 {
				board := "pc-churn0"
				if w%2 == 1 {
					board = fmt.Sprintf("pc-churn%d", (w+i)%boards)
				}
				id := fmt.Sprintf("c%d", i)
				if err := conn.Subscribe(id, periodClosedSub, map[string]any{"b": board}); err != nil {
					t.Error(err)
					return
				}
				if err := conn.Stop(id); err != nil {
					t.Error(err)
					return
				}
			}
			// The last one stays until the connection closes.
			if err := conn.Subscribe("last", periodClosedSub, map[string]any{"b": "pc-churn1"}); err != nil {
				t.Error(err)
			}
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				ctx, cancel := context.WithCancel(t.Context())
				resp, events := sseOpen(t, ctx, s, http.MethodPost, "", periodClosedSub,
					map[string]any{"b": fmt.Sprintf("pc-churn%d", (w+i)%boards)})
				if resp.StatusCode != http.StatusOK {
					t.Errorf("SSE status %d", resp.StatusCode)
				}
				cancel()
				for range events {
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	waitMetric(t, s, "lb_websocket_connections", 0, 10*time.Second)
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 0, 10*time.Second)
	waitUntil(t, 10*time.Second, "no board channel listened", func() bool { return listened() == 0 })
	http.DefaultClient.CloseIdleConnections()
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > base && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// Server shutdown with periodClosed subscriptions open over graphql-transport-ws, graphql-ws and SSE: it is
// prompt, the websockets get the going-away close and the event stream a complete event, and none of them a
// NOT_FOUND (the board still exists).
func TestPeriodClosedServerShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "pc-shut", "windows": []string{"DAILY"}})
	ctx := ctxT(t, 20*time.Second)
	var conns []*wstest.Conn
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		c := wstest.Dial(t, s.WSURL, proto, nil)
		if err := c.Subscribe("c", periodClosedSub, map[string]any{"b": "pc-shut"}); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	_, events := sseOpen(t, ctx, s, http.MethodPost, "", periodClosedSub, map[string]any{"b": "pc-shut"})
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 3, 5*time.Second)
	start := time.Now()
	s.Shutdown(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	for _, c := range conns {
		for {
			m, err := c.Next(ctx)
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
					t.Errorf("%s: want close 1001, got %v", c.Subprotocol(), err)
				}
				break
			}
			if len(m.Errors()) > 0 {
				t.Errorf("%s: an error at shutdown: %s %s", c.Subprotocol(), m.Type, m.Payload)
			}
		}
	}
	sawComplete := false
	for ev := range events {
		if strings.Contains(ev.data, `"errors"`) {
			t.Errorf("SSE: an error at shutdown: %+v", ev)
		}
		sawComplete = sawComplete || ev.event == "complete"
	}
	if !sawComplete {
		t.Error("SSE: no complete event at shutdown")
	}
}

// A board whose only live subscriptions on server b are periodClosed ones, deleted through server a (not created
// again): every one of them ends with one NOT_FOUND, then complete, over graphql-transport-ws, graphql-ws and SSE
// (POST and GET). b's poll is an hour, so the deletion notice ends them.
func TestPeriodClosedOnlyDeletedEveryTransport(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	slow := cfg
	slow.Closes.PollInterval = time.Hour
	a, b := startServer(t, cfg), startServer(t, slow)
	const id = "pc-only"
	a.create(t, map[string]any{"id": id, "windows": []string{"DAILY"}})
	ctx := ctxT(t, 30*time.Second)
	tws := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	legacy := wstest.Dial(t, b.WSURL, wstest.LegacyWS, nil)
	for _, c := range []*wstest.Conn{tws, legacy} {
		if err := c.Subscribe("c", periodClosedSub, map[string]any{"b": id}); err != nil {
			t.Fatal(err)
		}
	}
	_, post := sseOpen(t, ctx, b, http.MethodPost, "", periodClosedSub, map[string]any{"b": id})
	_, get := sseOpen(t, ctx, b, http.MethodGet, "", periodClosedSub, map[string]any{"b": id})
	waitMetric(t, b, `lb_subscriptions{field="periodClosed"}`, 4, 5*time.Second)
	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
	wantDeletedEnd(t, tws, 10*time.Second, "c")
	wantDeletedEnd(t, legacy, 10*time.Second, "c")
	sseWantDeletedEnd(t, post, 10*time.Second, "SSE POST periodClosed")
	sseWantDeletedEnd(t, get, 10*time.Second, "SSE GET periodClosed")
}

// With the ledger, a FLUSHALL and the ledger's restore of the board is no deletion: periodClosed subscriptions
// (websocket and SSE) go on, with no NOT_FOUND, and get the close of a period after the restore.
func TestPeriodClosedFlushallRestoreKeeps(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	rx := newFlakyReceiver(t)
	s, rdb, _ := durableSetup(t, clock, rx)
	ctx := ctxT(t, 40*time.Second)
	conn := subscribeCloses(t, s, "cup")
	_, events := sseOpen(t, ctx, s, http.MethodPost, "", periodClosedSub, map[string]any{"b": "cup"})
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 2, 5*time.Second)
	flushAndWaitRestored(t, s, rdb)
	s.submit(t, map[string]any{"board": "cup", "playerId": "dan", "score": 5, "eventId": "d1"})
	// The day ends and its grace (60 s) passes: the period closes.
	now := clock.Now()
	clock.Set(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 1, 1, 0, time.UTC))
	period := now.Format("2006-01-02")
	for {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		m, err := conn.Next(c)
		cancel()
		if err != nil {
			t.Fatalf("websocket: no close of %s after the restore: %v", period, err)
		}
		if m.ID != "c" {
			continue
		}
		if !m.IsData() || len(m.Errors()) > 0 {
			t.Fatalf("websocket: the subscription ended after a FLUSHALL: %s %s", m.Type, m.Payload)
		}
		if strings.Contains(string(m.Payload), period) {
			break
		}
	}
	for {
		ev := nextEvent(t, events, 15*time.Second)
		if ev.event != "next" || strings.Contains(ev.data, `"errors"`) {
			t.Fatalf("SSE after a FLUSHALL: %+v", ev)
		}
		if strings.Contains(ev.data, period) {
			break
		}
	}
}
