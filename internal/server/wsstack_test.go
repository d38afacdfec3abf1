package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// TestIdleConnectionStack: an idle websocket with a live subscription costs one goroutine of at most 4 KiB of
// stack, on both protocols (gqlstream's offStack: what the connection does with a message runs off its stack;
// without it, 8.5 KiB on graphql-transport-ws, 5.9 on graphql-ws). The clients are bare sockets (rawWSClient), which start
// no goroutines, so the process's stack growth is the server's. It measures a process that has run nothing else
// (make test runs it on its own, without the race detector, whose instrumentation doubles stacks): stacks freed
// earlier in the process could be reused and hide growth.
func TestIdleConnectionStack(t *testing.T) {
	if redistest.Race {
		t.Skip("stack sizes under the race detector are not the server's (make test runs this test without it)")
	}
	s := idleServer(t, "stack")
	per := idleGrowth(t, s, "stack", 60, func(ms *runtime.MemStats) uint64 { return ms.StackInuse })
	t.Logf("%d bytes of stack per idle connection", per)
	if per > 5<<10 {
		t.Fatalf("%d bytes of stack per idle connection, want at most 4 KiB", per)
	}
}

// idleServer starts a server with board, which holds one player, for the idle connections' subscriptions.
func idleServer(t *testing.T, board string) *testServer {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": board})
	s.submit(t, map[string]any{"board": board, "playerId": "p", "score": 1.0})
	return s
}

// idleDial opens an idle subscription to board's top on s with protocol proto, on a bare socket (rawWSClient).
func idleDial(t *testing.T, s *testServer, board, proto string) net.Conn {
	t.Helper()
	addr := strings.TrimSuffix(strings.TrimPrefix(s.WSURL, "ws://"), "/graphql")
	c, err := rawWSClient(addr, proto, `subscription { topUpdates(board: "`+board+`") { version entries { playerId rank } } }`)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// idleGrowth opens each idle subscriptions to board's top on s per protocol, after five that start the server's
// shared machinery (pings, writers, the board's view), all closed when the test ends. It checks that they keep
// one goroutine each (the server's goroutines of the upgrades and of the first responses end on their own) and
// returns how much the figure of runtime.MemStats that value reads grew per connection.
func idleGrowth(t *testing.T, s *testServer, board string, each int, value func(*runtime.MemStats) uint64) int64 {
	t.Helper()
	conns := make([]net.Conn, 0, 5+2*each) // made before the measure: the heap's growth is the server's
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	dial := func(proto string) { conns = append(conns, idleDial(t, s, board, proto)) }
	for range 5 {
		dial(wstest.TransportWS)
	}
	goroutines := settle(0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := value(&ms)
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		for range each {
			dial(proto)
		}
	}
	n := 2 * each
	if g := settle(goroutines+n) - goroutines; g > n+5 {
		t.Fatalf("%d goroutines for %d idle connections, want one each", g, n)
	}
	runtime.ReadMemStats(&ms)
	return (int64(value(&ms)) - int64(before)) / int64(n)
}

// settle waits until the goroutines are down to want, or none has ended for 500 ms, then collects: stacks
// shrink, and freed ones go back to the heap, at a collection.
func settle(want int) int {
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

// TestIdleConnectionHeap: an idle websocket with a live subscription keeps at most 7.5 KiB of live heap in the
// server, on both protocols (5,650-6,450 bytes measured). It was 11,000 before the session went on in a goroutine
// of its own (the handler chain that upgraded it kept the upgrade request and its headers) and before a
// connection's operations moved out of Go maps (8,200-8,800 after those), and before a streamed subscription let
// go of gqlgen's state of its operation (its updates rendered by one renderer per document and variables, its
// end answered by the stream). The clients are bare sockets that speak just enough of the protocol
// (rawWSClient), so that what the process's heap grows by is the server's. Run without the race detector (make
// test), as TestIdleConnectionStack.
func TestIdleConnectionHeap(t *testing.T) {
	if redistest.Race {
		t.Skip("heap sizes under the race detector are not the server's (make test runs this test without it)")
	}
	s := idleServer(t, "heap")
	per := idleGrowth(t, s, "heap", 40, func(ms *runtime.MemStats) uint64 { return ms.HeapAlloc })
	t.Logf("%d bytes of live heap per idle connection (server, and a bare socket of the client)", per)
	if per > 7680 {
		t.Fatalf("%d bytes of live heap per idle connection, want at most 7.5 KiB", per)
	}
}

// rawWSClient opens a websocket to addr's /graphql with subprotocol proto on a bare socket, initialises the
// session, subscribes with query and reads until the subscription's first response; it then holds nothing but
// the socket (gorilla's client keeps 8 KiB of buffers a connection).
func rawWSClient(addr, proto, query string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	_, err = fmt.Fprintf(c, "GET /graphql HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		addr, proto)
	if err != nil {
		return fail(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fail(fmt.Errorf("upgrade: HTTP %d", resp.StatusCode))
	}
	subscribe, data := "subscribe", `"next"`
	if proto == wstest.LegacyWS {
		subscribe, data = "start", `"data"`
	}
	q, _ := json.Marshal(query)
	for _, m := range []string{`{"type":"connection_init"}`,
		`{"type":"` + subscribe + `","id":"1","payload":{"query":` + string(q) + `}}`} {
		// A client's frame is masked; a zero mask leaves the payload as it is.
		frame := []byte{0x81, 0x80 | 126, byte(len(m) >> 8), byte(len(m)), 0, 0, 0, 0}
		if _, err := c.Write(append(frame, m...)); err != nil {
			return fail(err)
		}
	}
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return fail(err)
		}
		size := int(h[1] & 0x7f)
		switch size {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return fail(err)
			}
			size = int(b[0])<<8 | int(b[1])
		case 127:
			return fail(errors.New("a frame over 64 KiB"))
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(br, payload); err != nil {
			return fail(err)
		}
		if h[0]&0x0f == 0x1 && bytes.Contains(payload, []byte(data)) {
			if br.Buffered() > 0 {
				return fail(errors.New("more than the first response arrived"))
			}
			return c, nil
		}
	}
}
