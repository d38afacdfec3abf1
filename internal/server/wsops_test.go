package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// TestWSOperationsInFlight: a connection has at most MAX_SUBSCRIPTIONS_PER_CONN operations in flight, queries
// and mutations included (they were not bounded at all). With Redis paused, three times as many rank queries as
// the limit are sent at once: the limit run, the others are answered RATE_LIMITED at once, without gqlgen, and
// the connection stays usable. Not parallel: it compares goroutine counts.
func TestWSOperationsInFlight(t *testing.T) {
	const limit = 5
	srv := redistest.Standalone(t)
	rdb := srv.Client(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + srv.Addr
	cfg.MaxSubscriptionsPerConn = limit
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "wsp"})
	s.submit(t, map[string]any{"board": "wsp", "playerId": "p", "score": 7})
	ctx := ctxT(t, 60*time.Second)
	rankQuery := `{ rank(board: "wsp", playerId: "p") { rank score } }`

	// Goroutine baseline, after a first connection has come and gone.
	warm := wsDial(t, s, wstest.TransportWS)
	wsInit(t, warm)
	wsSend(t, warm, wsSubscribe("w", rankQuery))
	if m, err := wsRead(warm, 5*time.Second); err != nil || m.Type != "next" {
		t.Fatalf("warm-up: %+v %v", m, err)
	}
	warm.Close()
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	base := runtime.NumGoroutine()

	ws := wsDial(t, s, wstest.TransportWS)
	wsInit(t, ws)
	const pause = 2 * time.Second
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for i := range 3 * limit {
		wsSend(t, ws, wsSubscribe(fmt.Sprint("q", i), rankQuery))
	}
	limited, answered, completed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for len(limited)+len(completed) < 3*limit {
		m, err := wsRead(ws, 10*time.Second)
		if err != nil {
			t.Fatalf("after %d RATE_LIMITED and %d answers: %v", len(limited), len(completed), err)
		}
		switch m.Type {
		case "error":
			var errs []struct {
				Message    string
				Extensions map[string]any
			}
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) != 1 ||
				errs[0].Message != "too many operations in flight on this connection" ||
				errs[0].Extensions["code"] != "RATE_LIMITED" {
				t.Fatalf("unexpected error for %s: %s", m.ID, m.Payload)
			}
			if time.Since(paused) > pause {
				t.Errorf("%s was refused only after Redis came back", m.ID)
			}
			limited[m.ID] = true
		case "next":
			r, err := m.Result()
			if err != nil || len(r.Errors) > 0 || !strings.Contains(string(r.Data), `"score":7`) {
				t.Fatalf("unexpected result for %s: %s", m.ID, m.Payload)
			}
			answered[m.ID] = true
		case "complete":
			if !answered[m.ID] {
				t.Fatalf("complete for %s before its result", m.ID)
			}
			completed[m.ID] = true
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
	if len(completed) != limit || len(limited) != 2*limit {
		t.Fatalf("want %d answered and %d RATE_LIMITED, got %d and %d", limit, 2*limit, len(completed), len(limited))
	}
	for id := range limited {
		if completed[id] {
			t.Fatalf("%s was both refused and answered", id)
		}
	}
	// The connection is usable, and its operations' slots are free again: limit queries at once all run.
	for i := range limit {
		wsSend(t, ws, wsSubscribe(fmt.Sprint("again", i), rankQuery))
	}
	for done := 0; done < limit; {
		m, err := wsRead(ws, 10*time.Second)
		if err != nil || m.Type == "error" {
			t.Fatalf("after the pause: %+v %v", m, err)
		}
		if m.Type == "complete" {
			done++
		}
	}
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	ws.Close()
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > base && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestWSStuckReaderClosed: a peer that stops reading is closed once a write to it has waited the write timeout
// (gqlgen only reported the failed write, and the connection stayed until the pong deadline: two ping intervals).
// Without the race detector: filling the socket buffers is 12 MB of introspection rendered in this process, 24 s of
// the race run's longest package with it (the stuck streams of SSE and of the stream writers are held under it).
func TestWSStuckReaderClosed(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	cfg := testConfig(t)
	cfg.WSPingInterval = time.Minute // the pong deadline (2 minutes) must not be what closes it
	s := startServer(t, cfg)
	const writeTimeout = 500 * time.Millisecond
	s.App.streams.Tune(func(set *gqlstream.Settings) { set.WriteTimeout = writeTimeout })
	// The client's socket buffer holds what the kernel gives an application that does not read (128 KB), the
	// server's grows to its maximum (4 MB on Linux); the writes block once both are full.
	d := websocket.Dialer{Subprotocols: []string{wstest.TransportWS}, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial(s.WSURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wsInit(t, ws)
	// Each query answers about 200 KB (ten introspections of 20 KB), 12 MB in all; the client reads none of it.
	var q strings.Builder
	q.WriteString("{")
	for i := range 10 {
		fmt.Fprintf(&q, ` s%d: __schema { types { name kind description fields { name description args { name description } type { name kind ofType { name kind } } } } }`, i)
	}
	q.WriteString(" }")
	for i := range 60 {
		wsSend(t, ws, wsSubscribe(fmt.Sprint("s", i), q.String()))
	}
	sent := time.Now()
	// Filling the socket buffers takes the server's CPU for ~20 introspections of 200 KB: a few seconds under -race
	// alone, over 20 s on two cores shared with the rest of the suite (twice in 3 runs of make test here). The
	// bound stays well below the pong deadline (2 minutes), the close this test must not wait for.
	bound := writeTimeout + 60*time.Second
	for wsOpenConns(s) > 0 {
		if time.Since(sent) > bound {
			t.Fatalf("the connection of a peer that does not read is still open %v after the last message "+
				"(write timeout %v)", bound, writeTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("closed %v after the last message", time.Since(sent).Round(time.Millisecond))
	// The peer, reading at last, gets what was buffered and then the end of the connection.
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := 0
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the client does not see the connection end (%d bytes read)", got)
			}
			t.Logf("the client read %d KB, then: %v", got>>10, err)
			break
		}
		got += len(data)
	}
}

// TestWSDeadlinesCleared: the http.Server's ReadTimeout and WriteTimeout end requests, not websockets. (Only
// websockets are used once the timeouts have passed: the server closes idle HTTP connections after ReadTimeout.)
func TestWSDeadlinesCleared(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReadTimeout = 300 * time.Millisecond
	cfg.WriteTimeout = 300 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "wsp"})
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		t.Run(proto+", connection_init late", func(t *testing.T) {
			t.Parallel()
			// Before connection_init nothing else sets a deadline: one left by net/http would end the wait.
			ws := wsDial(t, s, proto)
			time.Sleep(time.Second)
			wsInit(t, ws)
		})
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t, 10*time.Second)
			c := wstest.Dial(t, s.WSURL, proto, map[string]any{"authorization": "Bearer " + testSubmitKey})
			time.Sleep(time.Second)
			if err := c.Subscribe("1", wsTopSub, nil); err != nil {
				t.Fatal(err)
			}
			c.NextData(t, ctx, "1", nil)
			time.Sleep(time.Second)
			if err := c.Subscribe("m", submitMutation, map[string]any{"in": map[string]any{
				"board": "wsp", "playerId": proto, "score": 1}}); err != nil {
				t.Fatal(err)
			}
			for {
				m, err := c.Next(ctx)
				if err != nil {
					t.Fatalf("waiting for the update: %v", err)
				}
				if m.ID == "m" && len(m.Errors()) > 0 {
					t.Fatalf("submitScore: %s", m.Payload)
				}
				if m.ID == "1" {
					if !m.IsData() || len(m.Errors()) > 0 {
						t.Fatalf("want an update, got %s %s", m.Type, m.Payload)
					}
					break
				}
			}
		})
	}
}

// Unit tests of the checks, without a server.

// TestWSIDReuse: an id is free again once the peer completed its operation, or the server ended it, and the new
// operation under it is the one the next complete stops (gqlgen's map of operations by id could lose it).
func TestWSIDReuse(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "wsp"})
	ws := wsDial(t, s, wstest.TransportWS)
	wsInit(t, ws)
	for i := range 20 {
		// Subscribe, complete and subscribe again at once: the first may still be running in gqlgen.
		wsSend(t, ws, wsSubscribe("r", wsTopSub))
		wsSend(t, ws, `{"type":"complete","id":"r"}`)
		wsSend(t, ws, wsSubscribe("r", wsTopSub))
		// Whatever the first one sent, the second one sends a snapshot.
		for {
			m, err := wsRead(ws, 5*time.Second)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if m.Type == "next" && strings.Contains(string(m.Payload), `"version"`) {
				break
			}
		}
		wsSend(t, ws, `{"type":"complete","id":"r"}`)
		// A query under the same id once the server has ended it.
		wsSend(t, ws, wsSubscribe("q", wsTypename))
		for m, err := wsRead(ws, 5*time.Second); m.ID != "q" || m.Type != "complete"; m, err = wsRead(ws, 5*time.Second) {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
	// Every subscription was stopped by a complete.
	waitMetric(t, s, `lb_subscriptions{field="topUpdates"}`, 0, 5*time.Second)
	if n := s.App.streams.Stats().OpsInFlight; n != 0 {
		t.Errorf("%d operations in flight", n)
	}
}
