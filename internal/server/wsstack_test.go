package server

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// TestIdleConnectionStack: an idle websocket with a live subscription costs one goroutine of at most 4 KiB of
// stack, on both protocols (offStack: what the connection does with a message runs off its stack; without it,
// 8.5 KiB on graphql-transport-ws, 5.9 on graphql-ws). The clients are bare gorilla connections, which start no
// goroutines of their own, so the process's stack growth is the server's. It measures a process that has run
// nothing else (make test runs it on its own, without the race detector, whose instrumentation doubles stacks):
// stacks freed earlier in the process could be reused and hide growth.
func TestIdleConnectionStack(t *testing.T) {
	if raceEnabled {
		t.Skip("stack sizes under the race detector are not the server's (make test runs this test without it)")
	}
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "stack"})
	s.submit(t, map[string]any{"board": "stack", "playerId": "p", "score": 1.0})
	// settle waits until the goroutines are down to want, or none has ended for 500 ms, then collects: stacks
	// shrink, and freed ones go back to the heap, at a collection.
	settle := func(want int) int {
		deadline := time.Now().Add(10 * time.Second)
		for last, same := 0, 0; runtime.NumGoroutine() > want && same < 25 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			if g := runtime.NumGoroutine(); g == last {
				same++
			} else {
				last, same = g, 0
			}
		}
		runtime.GC()
		runtime.GC()
		return runtime.NumGoroutine()
	}
	const each = 60
	var ms runtime.MemStats
	goroutines := settle(0)
	runtime.ReadMemStats(&ms)
	before := ms.StackInuse
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		subscribe, data := "subscribe", `"next"`
		if proto == wstest.LegacyWS {
			subscribe, data = "start", `"data"`
		}
		d := websocket.Dialer{Subprotocols: []string{proto}, HandshakeTimeout: 5 * time.Second}
		for range each {
			ws, _, err := d.Dial(s.WSURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			for _, m := range []string{`{"type":"connection_init"}`, `{"type":"` + subscribe +
				`","id":"1","payload":{"query":"subscription { topUpdates(board: \"stack\") { version entries { playerId rank } } }"}}`} {
				if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			for got := ""; !strings.Contains(got, data); { // connection_ack (and ka on graphql-ws), then the snapshot
				_, b, err := ws.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
		}
	}
	const n = 2 * each
	// The server's goroutines of the upgrades and of the first responses end on their own.
	if g := settle(goroutines+n) - goroutines; g > n+5 {
		t.Fatalf("%d goroutines for %d idle connections, want one each", g, n)
	}
	runtime.ReadMemStats(&ms)
	per := (int64(ms.StackInuse) - int64(before)) / n
	t.Logf("%d bytes of stack per idle connection", per)
	if per > 5<<10 {
		t.Fatalf("%d bytes of stack per idle connection, want at most 4 KiB", per)
	}
}
