package server

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// sseWantDeletedEnd reads an event stream until its subscription ends: one NOT_FOUND error, then complete.
func sseWantDeletedEnd(t *testing.T, events <-chan sseEvent, within time.Duration, what string) {
	t.Helper()
	deadline := time.After(within)
	errored := false
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended without complete (NOT_FOUND seen: %v)", what, errored)
			}
			switch {
			case ev.event == "complete":
				if !errored {
					t.Fatalf("%s: complete without a NOT_FOUND error", what)
				}
				return
			case strings.Contains(ev.data, `"errors"`):
				if !strings.Contains(ev.data, `"code":"NOT_FOUND"`) || errored {
					t.Fatalf("%s: want one NOT_FOUND error, got %s", what, ev.data)
				}
				errored = true
			}
		case <-deadline:
			t.Fatalf("%s: no NOT_FOUND end within %v (NOT_FOUND seen: %v)", what, within, errored)
		}
	}
}

// A board deleted and created again through server a ends the subscriptions server b serves of it over every
// transport: graphql-transport-ws (topUpdates, rankUpdates), the legacy graphql-ws (topUpdates, rankUpdates) and
// server-sent events (topUpdates, rankUpdates), each with one NOT_FOUND, then complete.
func TestRecreatedBoardEndsOnEveryTransport(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	const id = "rt-every"
	a.create(t, map[string]any{"id": id})
	for i, p := range []string{"x", "y", "z"} {
		a.submit(t, map[string]any{"board": id, "playerId": p, "score": float64(i)})
	}
	ctx := ctxT(t, 30*time.Second)
	tws := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	legacy := wstest.Dial(t, b.WSURL, wstest.LegacyWS, nil)
	for _, conn := range []*wstest.Conn{tws, legacy} {
		if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "top", nil)
		if err := conn.Subscribe("rank", rankUpdatesSub, map[string]any{"b": id, "p": "y"}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "rank", nil)
	}
	_, topEvents := sseOpen(t, ctx, b, http.MethodPost, "", topUpdatesSub, map[string]any{"b": id, "n": 10})
	if ev := nextEvent(t, topEvents, 5*time.Second); ev.event != "next" {
		t.Fatalf("SSE topUpdates: %+v", ev)
	}
	_, rankEvents := sseOpen(t, ctx, b, http.MethodGet, "", rankUpdatesSub, map[string]any{"b": id, "p": "y"})
	if ev := nextEvent(t, rankEvents, 5*time.Second); ev.event != "next" {
		t.Fatalf("SSE rankUpdates: %+v", ev)
	}

	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
	a.create(t, map[string]any{"id": id, "order": "ASC"})
	a.submit(t, map[string]any{"board": id, "playerId": "y", "score": 1})

	wantDeletedEnd(t, tws, 10*time.Second, "top", "rank")
	wantDeletedEnd(t, legacy, 10*time.Second, "top", "rank")
	sseWantDeletedEnd(t, topEvents, 10*time.Second, "SSE topUpdates")
	sseWantDeletedEnd(t, rankEvents, 10*time.Second, "SSE rankUpdates")
}

// A FLUSHALL and the ledger's restore of the board is no deletion: live subscriptions over every transport go on
// (no NOT_FOUND) and see writes made after the restore.
func TestFlushallRestoreKeepsLiveSubscriptions(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	rx := newFlakyReceiver(t)
	s, rdb, _ := durableSetup(t, clock, rx)
	ctx := ctxT(t, 40*time.Second)
	tws := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	legacy := wstest.Dial(t, s.WSURL, wstest.LegacyWS, nil)
	for _, conn := range []*wstest.Conn{tws, legacy} {
		if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": "cup", "n": 10}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "top", nil)
		if err := conn.Subscribe("rank", rankUpdatesSub, map[string]any{"b": "cup", "p": "ann"}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "rank", nil)
	}
	_, events := sseOpen(t, ctx, s, http.MethodPost, "", topUpdatesSub, map[string]any{"b": "cup", "n": 10})
	nextEvent(t, events, 5*time.Second)

	flushAndWaitRestored(t, s, rdb)
	time.Sleep(300 * time.Millisecond)
	s.submit(t, map[string]any{"board": "cup", "playerId": "ann", "score": 500, "eventId": "a2"})

	for name, conn := range map[string]*wstest.Conn{"graphql-transport-ws": tws, "graphql-ws": legacy} {
		sawTop, sawRank := false, false
		for !sawTop || !sawRank {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := conn.Next(c)
			cancel()
			if err != nil {
				t.Fatalf("%s: waiting for updates after the restore (top %v, rank %v): %v", name, sawTop, sawRank, err)
			}
			if len(m.Errors()) > 0 || m.Type == "complete" || m.Type == "error" {
				t.Fatalf("%s: %s ended after a FLUSHALL: %s %s", name, m.ID, m.Type, m.Payload)
			}
			if !m.IsData() {
				continue
			}
			if strings.Contains(string(m.Payload), `"ann"`) && strings.Contains(string(m.Payload), `500`) {
				switch m.ID {
				case "top":
					sawTop = true
				case "rank":
					sawRank = true
				}
			}
		}
	}
	for {
		ev := nextEvent(t, events, 10*time.Second)
		if ev.event != "next" || strings.Contains(ev.data, `"errors"`) {
			t.Fatalf("SSE after a FLUSHALL: %+v", ev)
		}
		if strings.Contains(ev.data, `"ann"`) && strings.Contains(ev.data, `500`) {
			break
		}
	}
}

// A top list that server b serves from its cache (the same query again and again) follows a board deleted and
// created again through server a: once the deletion notice has reached b, b answers the new board's list.
func TestRecreatedBoardCachedTopOnOtherServer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	const id = "rt-cached"
	const q = `query($b: ID!) { top(board: $b, first: 5) { playerId score } }`
	a.create(t, map[string]any{"id": id})
	for i, p := range []string{"old1", "old2", "old3"} {
		a.submit(t, map[string]any{"board": id, "playerId": p, "score": float64(10 + i)})
	}
	for range 5 { // cached by now
		if r := b.do(t, "", q, map[string]any{"b": id}); len(r.Errors) > 0 || !strings.Contains(string(r.Data), "old3") {
			t.Fatalf("top on b: %s %+v", r.Data, r.Errors)
		}
	}
	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
	a.create(t, map[string]any{"id": id, "order": "ASC"})
	for i, p := range []string{"new1", "new2"} {
		a.submit(t, map[string]any{"board": id, "playerId": p, "score": float64(1 + i)})
	}
	want := string(a.do(t, "", q, map[string]any{"b": id}).Data)
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = string(b.do(t, "", q, map[string]any{"b": id}).Data); got == want {
			break
		}
	}
	if got != want {
		t.Fatalf("b answers %s for the re-created board, a %s", got, want)
	}
	for range 20 {
		if got := string(b.do(t, "", q, map[string]any{"b": id}).Data); got != want {
			t.Fatalf("b answers %s again, a %s", got, want)
		}
	}
}

// Many deletions and re-creations of a board with live subscriptions over both websocket protocols leave no
// goroutine behind once the connections have closed.
func TestRecreateCyclesNoGoroutineLeak(t *testing.T) {
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	const id = "rt-leak"
	a.create(t, map[string]any{"id": id, "windows": []string{"ALL_TIME", "DAILY"}})
	a.submit(t, map[string]any{"board": id, "playerId": "p", "score": 1})
	warm := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	if err := warm.Subscribe("w", topUpdatesSub, map[string]any{"b": id, "n": 3}); err != nil {
		t.Fatal(err)
	}
	warm.NextData(t, ctxT(t, 10*time.Second), "w", nil)
	warm.Close()
	<-warm.Done()
	waitMetric(t, b, "lb_websocket_connections", 0, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	base := runtime.NumGoroutine()

	for i := range 15 {
		ctx := ctxT(t, 20*time.Second)
		tws := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
		legacy := wstest.Dial(t, b.WSURL, wstest.LegacyWS, nil)
		for _, conn := range []*wstest.Conn{tws, legacy} {
			if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
				t.Fatal(err)
			}
			conn.NextData(t, ctx, "top", nil)
			if err := conn.Subscribe("rank", rankUpdatesSub, map[string]any{"b": id, "p": "p"}); err != nil {
				t.Fatal(err)
			}
			conn.NextData(t, ctx, "rank", nil)
		}
		a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
		shards := 1 + 2*(i%2)
		a.create(t, map[string]any{"id": id, "windows": []string{"ALL_TIME", "DAILY"}, "shards": shards})
		a.submit(t, map[string]any{"board": id, "playerId": "p", "score": float64(i)})
		wantDeletedEnd(t, tws, 10*time.Second, "top", "rank")
		wantDeletedEnd(t, legacy, 10*time.Second, "top", "rank")
		tws.Close()
		legacy.Close()
		<-tws.Done()
		<-legacy.Done()
	}
	waitMetric(t, b, "lb_websocket_connections", 0, 5*time.Second)
	var n int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= base+3 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after the cycles, %d before\n%s", n, base, buf)
		}
	}
}
