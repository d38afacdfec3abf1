package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// Tests of the graphql-transport-ws rules that wsConn enforces (wsprotocol.go). They use raw gorilla clients, so
// that every byte sent and every close code received is the test's own.

// wsDial opens a raw websocket to s with subprotocol proto; it is closed in t's cleanup.
func wsDial(t testing.TB, s *testServer, proto string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{proto}, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial(s.WSURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Subprotocol() != proto {
		t.Fatalf("negotiated %q, want %q", ws.Subprotocol(), proto)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func wsSend(t testing.TB, ws *websocket.Conn, msg string) {
	t.Helper()
	ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatalf("sending %q: %v", msg, err)
	}
}

// wsRead returns the next message other than ping and pong, within d.
func wsRead(ws *websocket.Conn, d time.Duration) (wstest.Message, error) {
	ws.SetReadDeadline(time.Now().Add(d))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return wstest.Message{}, err
		}
		var m wstest.Message
		if err := json.Unmarshal(data, &m); err != nil {
			return m, fmt.Errorf("undecodable message %q: %w", data, err)
		}
		if m.Type != "ping" && m.Type != "pong" {
			return m, nil
		}
	}
}

// wsInit sends connection_init and waits for connection_ack.
func wsInit(t testing.TB, ws *websocket.Conn) {
	t.Helper()
	wsSend(t, ws, `{"type":"connection_init"}`)
	m, err := wsRead(ws, 5*time.Second)
	if err != nil || m.Type != "connection_ack" {
		t.Fatalf("want connection_ack, got %+v %v", m, err)
	}
}

// wsWantClose reads until the server closes the connection, which must be a close frame with code (within d),
// and returns its reason.
func wsWantClose(t testing.TB, ws *websocket.Conn, code int, d time.Duration) string {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(d))
	for {
		_, data, err := ws.ReadMessage()
		if err == nil {
			continue // messages sent before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("want close %d, got %v (last message %q)", code, err, data)
		}
		if ce.Code != code {
			t.Fatalf("want close %d, got %d %q", code, ce.Code, ce.Text)
		}
		return ce.Text
	}
}

// wsSettings changes the settings of the websocket connections s accepts from now on.
func wsSettings(s *testServer, f func(w *websockets)) {
	s.App.ws.mu.Lock()
	defer s.App.ws.mu.Unlock()
	f(s.App.ws)
}

// wsOpenConns is the number of websocket connections s has open.
func wsOpenConns(s *testServer) int {
	s.App.ws.mu.Lock()
	defer s.App.ws.mu.Unlock()
	return len(s.App.ws.conns)
}

// metricSum adds up the samples of /metrics whose line starts with name and contains every one of labels.
func metricSum(t testing.TB, s *testServer, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sum float64
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

const (
	wsTopSub   = `subscription { topUpdates(board: "wsp", first: 3) { version } }`
	wsRankSub  = `subscription { rankUpdates(board: "wsp", playerId: "p") { rank } }`
	wsTypename = `{ __typename }`
)

func wsSubscribe(id, query string) string {
	b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": id, "payload": map[string]any{"query": query}})
	return string(b)
}

// TestWSInvalidMessages: every malformed message closes the connection with 4400, before gqlgen sees it.
func TestWSInvalidMessages(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	sub := `"payload":{"query":"{ __typename }"}`
	afterAck := map[string]string{
		"not JSON":                  `{"type":"ping"`,
		"trailing data":             `{"type":"ping"} {}`,
		"an array":                  `[{"type":"ping"}]`,
		"a string":                  `"ping"`,
		"null":                      `null`,
		"a number":                  `1`,
		"no type":                   `{"id":"1",` + sub + `}`,
		"type not a string":         `{"type":1}`,
		"type null":                 `{"type":null}`,
		"type in other case":        `{"TYPE":"ping"}`,
		"unknown type":              `{"type":"bogus"}`,
		"server-only type next":     `{"type":"next","id":"1","payload":{}}`,
		"server-only type ack":      `{"type":"connection_ack"}`,
		"legacy type start":         `{"type":"start","id":"1",` + sub + `}`,
		"subscribe, id a number":    `{"type":"subscribe","id":1,` + sub + `}`,
		"subscribe, no payload":     `{"type":"subscribe","id":"1"}`,
		"subscribe, payload null":   `{"type":"subscribe","id":"1","payload":null}`,
		"subscribe, payload string": `{"type":"subscribe","id":"1","payload":"{ __typename }"}`,
		"subscribe, payload array":  `{"type":"subscribe","id":"1","payload":[]}`,
		"complete, no id":           `{"type":"complete"}`,
		"complete, empty id":        `{"type":"complete","id":""}`,
		"ping, payload a string":    `{"type":"ping","payload":"x"}`,
		"invalid UTF-8 in an id":    "{\"type\":\"subscribe\",\"id\":\"a\xffb\"," + sub + "}",
		"invalid UTF-8 in a query":  "{\"type\":\"subscribe\",\"id\":\"1\",\"payload\":{\"query\":\"{ __typename } #\xc3\"}}",
		"UTF-8 encoded surrogate":   "{\"type\":\"subscribe\",\"id\":\"\xed\xa0\x80\"," + sub + "}",
	}
	beforeInit := map[string]string{
		"not JSON first":                  `connection_init`,
		"connection_init, payload string": `{"type":"connection_init","payload":"token"}`,
		"connection_init, payload array":  `{"type":"connection_init","payload":[]}`,
	}
	for name, msg := range afterAck {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := wsDial(t, s, wstest.TransportWS)
			wsInit(t, ws)
			wsSend(t, ws, msg)
			if r := wsWantClose(t, ws, 4400, 5*time.Second); !strings.HasPrefix(r, "Invalid message received") {
				t.Errorf("reason %q", r)
			}
		})
	}
	for name, msg := range beforeInit {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := wsDial(t, s, wstest.TransportWS)
			wsSend(t, ws, msg)
			wsWantClose(t, ws, 4400, 5*time.Second)
		})
	}
	// Valid messages of every kind, with unknown fields and a repeated key, keep the connection.
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		ws := wsDial(t, s, wstest.TransportWS)
		wsSend(t, ws, `{"type":"ping","payload":{"x":1}}`) // before connection_init: answered by the server
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, data, err := ws.ReadMessage(); err != nil || string(data) != `{"payload":{"x":1},"type":"pong"}` {
			t.Fatalf("want pong, got %s %v", data, err)
		}
		wsSend(t, ws, `{"type":"connection_init","payload":null,"extra":true}`)
		if m, err := wsRead(ws, 5*time.Second); err != nil || m.Type != "connection_ack" {
			t.Fatalf("want connection_ack, got %+v %v", m, err)
		}
		wsSend(t, ws, `{"id":"x","type":"bogus","type":"subscribe","payload":{"query":"{ __typename }"},"extensions":{}}`)
		m, err := wsRead(ws, 5*time.Second)
		if err != nil || m.Type != "next" || m.ID != "x" || !strings.Contains(string(m.Payload), "Query") {
			t.Fatalf("want the result of x, got %+v %v", m, err)
		}
		wsSend(t, ws, `{"type":"complete","id":"never-started"}`)
		wsSend(t, ws, `{"type":"ping"}`)
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("the connection must stay open: %v", err)
			}
			if strings.Contains(string(data), `"pong"`) {
				break
			}
		}
	})
}

// TestWSSubscribeWithoutID: gqlgen ran a subscribe without an id (or with an empty one), under the id "", and
// answered it without one. It is an invalid message: 4400.
func TestWSSubscribeWithoutID(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	for name, msg := range map[string]string{
		"no id":    `{"type":"subscribe","payload":{"query":"{ __typename }"}}`,
		"empty id": `{"type":"subscribe","id":"","payload":{"query":"{ __typename }"}}`,
		"id null":  `{"type":"subscribe","id":null,"payload":{"query":"{ __typename }"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			ws := wsDial(t, s, wstest.TransportWS)
			wsInit(t, ws)
			wsSend(t, ws, msg)
			wsWantClose(t, ws, 4400, 5*time.Second)
		})
	}
}

// TestWSLoneSurrogateID: encoding/json decodes "\ud800" and "\udbff" alike to U+FFFD, so such ids collided in
// gqlgen. A lone surrogate escape anywhere in a message is 4400; a surrogate pair is a character like any other.
func TestWSLoneSurrogateID(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "wsp"})
	for _, id := range []string{`\ud800`, `\udbff`, `\uDC00`, `a\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\ude00\ud83d`} {
		t.Run(id, func(t *testing.T) {
			ws := wsDial(t, s, wstest.TransportWS)
			wsInit(t, ws)
			wsSend(t, ws, `{"type":"subscribe","id":"`+id+`","payload":{"query":"`+wsTopSub+`"}}`)
			wsWantClose(t, ws, 4400, 5*time.Second)
		})
	}
	t.Run("in a variable", func(t *testing.T) {
		ws := wsDial(t, s, wstest.TransportWS)
		wsInit(t, ws)
		wsSend(t, ws, `{"type":"subscribe","id":"v","payload":{"query":"query($p: ID!) { rank(board: \"wsp\", playerId: $p) { rank } }","variables":{"p":"\udfff"}}}`)
		wsWantClose(t, ws, 4400, 5*time.Second)
	})
	t.Run("pairs and escaped backslashes are fine", func(t *testing.T) {
		ws := wsDial(t, s, wstest.TransportWS)
		wsInit(t, ws)
		for raw, want := range map[string]string{`\ud83d\ude00`: "\U0001F600", `\uD83D\uDE01`: "\U0001F601", `\\ud800`: `\ud800`} {
			wsSend(t, ws, `{"type":"subscribe","id":"`+raw+`","payload":{"query":"{ __typename }"}}`)
			for _, typ := range []string{"next", "complete"} {
				m, err := wsRead(ws, 5*time.Second)
				if err != nil || m.Type != typ || m.ID != want {
					t.Fatalf("%s: want %s for id %q, got %+v %v", raw, typ, want, m, err)
				}
			}
		}
	})
}

// TestWSSubscribeBeforeAck: a subscribe before connection_ack is 4401 Unauthorized.
func TestWSSubscribeBeforeAck(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	ws := wsDial(t, s, wstest.TransportWS)
	wsSend(t, ws, wsSubscribe("1", wsTypename))
	if r := wsWantClose(t, ws, 4401, 5*time.Second); r != "Unauthorized" {
		t.Errorf("reason %q", r)
	}
}

// TestWSInitTimeout: no connection_init within the init timeout is 4408 on graphql-transport-ws (gqlgen closed
// with 1002 at its own InitTimeout); graphql-ws keeps gqlgen's 1002. A connection_init in time stops the timer.
func TestWSInitTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	const timeout = 400 * time.Millisecond
	wsSettings(s, func(w *websockets) { w.initTimeout = timeout })
	t.Run("graphql-transport-ws", func(t *testing.T) {
		t.Parallel()
		ws := wsDial(t, s, wstest.TransportWS)
		start := time.Now()
		wsSend(t, ws, `{"type":"ping"}`) // allowed before connection_init; does not count as one
		if r := wsWantClose(t, ws, 4408, timeout+5*time.Second); r != "Connection initialisation timeout" {
			t.Errorf("reason %q", r)
		}
		if d := time.Since(start); d < timeout-50*time.Millisecond {
			t.Errorf("closed after %v, before the timeout", d)
		}
	})
	t.Run("graphql-ws", func(t *testing.T) {
		t.Parallel()
		ws := wsDial(t, s, wstest.LegacyWS)
		if r := wsWantClose(t, ws, 1002, timeout+5*time.Second); r != "connection initialisation timeout" {
			t.Errorf("reason %q", r)
		}
	})
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		t.Run(proto+" in time", func(t *testing.T) {
			t.Parallel()
			c := wstest.Dial(t, s.WSURL, proto, nil)
			time.Sleep(3 * timeout)
			if err := c.Subscribe("1", wsTypename, nil); err != nil {
				t.Fatal(err)
			}
			c.NextData(t, ctxT(t, 5*time.Second), "1", nil)
		})
	}
}

// TestWSSecondInit: a second connection_init is 4429.
func TestWSSecondInit(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	ws := wsDial(t, s, wstest.TransportWS)
	wsInit(t, ws)
	wsSend(t, ws, `{"type":"connection_init"}`)
	if r := wsWantClose(t, ws, 4429, 5*time.Second); r != "Too many initialisation requests" {
		t.Errorf("reason %q", r)
	}
}

// TestWSDuplicateID: a subscribe with the id of a running operation is 4409, and never reaches gqlgen (it used
// to start a second operation under the same id, which the peer could not stop).
func TestWSDuplicateID(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "wsp"})
	for name, id := range map[string]string{"short": "dup", "long": strings.Repeat("é", 100)} {
		t.Run(name, func(t *testing.T) {
			ws := wsDial(t, s, wstest.TransportWS)
			wsInit(t, ws)
			wsSend(t, ws, wsSubscribe(id, wsTopSub))
			if m, err := wsRead(ws, 5*time.Second); err != nil || m.Type != "next" || m.ID != id {
				t.Fatalf("want data, got %+v %v", m, err)
			}
			wsSend(t, ws, wsSubscribe(id, wsRankSub))
			r := wsWantClose(t, ws, 4409, 5*time.Second)
			if want := "Subscriber for " + id + " already exists"; r != truncateString(want, 123) ||
				!utf8.ValidString(r) {
				t.Errorf("reason %q", r)
			}
		})
	}
	// The second subscription never started: rankUpdates answered nothing and never ran.
	if n := metricSum(t, s, "lb_graphql_operations_total", `field="rankUpdates"`); n != 0 {
		t.Errorf("rankUpdates answered %v times", n)
	}
	waitMetric(t, s, `lb_subscriptions{field="topUpdates"}`, 0, 5*time.Second)
	if n := metricSum(t, s, "lb_subscriptions", `field="rankUpdates"`); n != 0 {
		t.Errorf("%v rankUpdates running", n)
	}
}

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
	if n := s.App.ws.inFlight(); n != 0 {
		t.Errorf("%d operations in flight", n)
	}
}

// inFlight returns the operations in flight on all graphql-transport-ws connections.
func (s *websockets) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.tws != nil {
			n += c.tws.inFlight()
		}
	}
	return n
}

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
func TestWSStuckReaderClosed(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.WSPingInterval = time.Minute // the pong deadline (2 minutes) must not be what closes it
	s := startServer(t, cfg)
	const writeTimeout = 500 * time.Millisecond
	wsSettings(s, func(w *websockets) { w.writeTimeout = writeTimeout })
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
	bound := writeTimeout + 20*time.Second // it takes a few seconds (under -race) to fill the socket buffers
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

func TestParseClientMessage(t *testing.T) {
	for msg, want := range map[string]clientMessage{
		`{"type":"connection_init"}`:                                   {typ: "connection_init"},
		` {"type":"connection_init","payload":{"a":1}} `:               {typ: "connection_init", payload: json.RawMessage(`{"a":1}`)},
		`{"type":"ping","payload":null}`:                               {typ: "ping"},
		`{"type":"pong","payload":{}}`:                                 {typ: "pong", payload: json.RawMessage(`{}`)},
		`{"type":"subscribe","id":"\u00e9","payload":{"query":"x"}}`:   {typ: "subscribe", id: "é", payload: json.RawMessage(`{"query":"x"}`)},
		`{"type":"complete","id":"a","payload":5}`:                     {typ: "complete", id: "a"},
		`{"type":"complete","type":"subscribe","id":"a","payload":{}}`: {typ: "subscribe", id: "a", payload: json.RawMessage(`{}`)},
	} {
		got, problem := parseClientMessage([]byte(msg))
		if problem != "" || got.typ != want.typ || got.id != want.id || string(got.payload) != string(want.payload) {
			t.Errorf("%s: got %+v %q, want %+v", msg, got, problem, want)
		}
	}
}

func TestHasLoneSurrogate(t *testing.T) {
	for s, want := range map[string]bool{
		`"\ud800"`: true, `"\uDBFF"`: true, `"\udc00"`: true, `"\ud800\ud800"`: true, `"\ud800\n"`: true,
		`"\ud800"x`: true, `"\ud800\u00e9"`: true, `"\ud83d\ude00\ude00"`: true, `"\ud83d`: true,
		`"\ud83d\ude00"`: false, `"\\ud800"`: false, `"\\\\ud800"`: false, `"\u00e9\n\t\"\\"`: false,
		`"x\\"`: false, `"\u12"`: false, `"\`: false, `"` + "\xed\xa0\x80" + `"`: false, // raw: not an escape
	} {
		if got := hasLoneSurrogate([]byte(s)); got != want {
			t.Errorf("%s: got %v, want %v", s, got, want)
		}
	}
	// Strings of random characters, escaped as JSON with \u escapes (pairs above U+FFFF), have none; the same
	// with one surrogate escape spliced in at a character boundary has one.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var parts []string
		for range rng.IntN(8) {
			r := rune(rng.IntN(0x110000))
			if !utf8.ValidRune(r) {
				r = 'x'
			}
			parts = append(parts, escapeRune(r))
		}
		s := `"` + strings.Join(parts, "") + `"`
		if hasLoneSurrogate([]byte(s)) {
			t.Fatalf("%s: lone surrogate reported", s)
		}
		var decoded string
		if err := json.Unmarshal([]byte(s), &decoded); err != nil || strings.ContainsRune(decoded, utf8.RuneError) &&
			!strings.Contains(s, `\ufffd`) {
			t.Fatalf("%s: escaping is wrong: %q %v", s, decoded, err)
		}
		at := rng.IntN(len(parts) + 1)
		lone := fmt.Sprintf(`\u%04x`, 0xD800+rng.IntN(0x800))
		spliced := `"` + strings.Join(parts[:at], "") + lone + strings.Join(parts[at:], "") + `"`
		if !hasLoneSurrogate([]byte(spliced)) {
			t.Fatalf("%s: lone surrogate not reported", spliced)
		}
	}
}

// escapeRune writes r as JSON would inside a string, with a \u escape for anything outside printable ASCII.
func escapeRune(r rune) string {
	switch {
	case r == '"' || r == '\\':
		return `\` + string(r)
	case r >= 0x20 && r < 0x7f:
		return string(r)
	case r > 0xFFFF:
		r -= 0x10000
		return fmt.Sprintf(`\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// TestTransportStateIDs: operations get gqlgen ids of their own; ends are mapped back once.
func TestTransportStateIDs(t *testing.T) {
	s := newTransportState(2)
	in := func(msg string) inbound { return s.inbound([]byte(msg)) }
	gqlID := func(i inbound) string {
		t.Helper()
		var m struct{ ID string }
		if i.forward == nil || json.Unmarshal(i.forward, &m) != nil {
			t.Fatalf("not forwarded: %+v", i)
		}
		return m.ID
	}
	if i := in(`{"type":"subscribe","id":"a","payload":{}}`); i.closeCode != 4401 {
		t.Fatalf("subscribe before ack: %+v", i)
	}
	if i := in(`{"type":"connection_init"}`); !i.initialised {
		t.Fatalf("init: %+v", i)
	}
	s.outbound("connection_ack", "")
	a := gqlID(in(`{"type":"subscribe","id":"a","payload":{}}`))
	if i := in(`{"type":"subscribe","id":"a","payload":{}}`); i.closeCode != 4409 {
		t.Fatalf("duplicate: %+v", i)
	}
	if got := gqlID(in(`{"type":"complete","id":"a"}`)); got != a {
		t.Fatalf("complete of a went to %q, want %q", got, a)
	}
	a2 := gqlID(in(`{"type":"subscribe","id":"a","payload":{}}`)) // a is free, the first one still runs
	if a2 == a {
		t.Fatal("an id of gqlgen's was reused")
	}
	if i := in(`{"type":"subscribe","id":"b","payload":{}}`); !strings.Contains(string(i.reply), "RATE_LIMITED") ||
		!strings.Contains(string(i.reply), `"id":"b"`) {
		t.Fatalf("third operation in flight: %+v", i)
	}
	// The first one's messages are dropped: a is the second one's now.
	for _, typ := range []string{"next", "complete", "complete"} {
		if _, send := s.outbound(typ, a); send {
			t.Fatalf("%s of the replaced operation sent", typ)
		}
	}
	b := gqlID(in(`{"type":"subscribe","id":"b","payload":{}}`))
	if id, send := s.outbound("next", a2); !send || id != "a" {
		t.Fatalf("next of a: %q %v", id, send)
	}
	if id, send := s.outbound("error", a2); !send || id != "a" {
		t.Fatalf("error of a: %q %v", id, send)
	}
	if _, send := s.outbound("complete", a2); send {
		t.Fatal("complete after error sent")
	}
	if i := in(`{"type":"complete","id":"a"}`); i.forward != nil {
		t.Fatalf("complete of an ended operation forwarded: %+v", i)
	}
	// The peer's complete, then the server's: sent (nothing else uses the id).
	in(`{"type":"complete","id":"b"}`)
	if id, send := s.outbound("complete", b); !send || id != "b" {
		t.Fatalf("complete of b: %q %v", id, send)
	}
	if n := s.inFlight(); n != 0 {
		t.Fatalf("%d in flight", n)
	}
	if i := in(`{"type":"connection_init"}`); i.closeCode != 4429 {
		t.Fatalf("second init: %+v", i)
	}
}

// TestWriteCloseReason: close reasons are cut to 123 bytes on a character boundary.
func TestWriteCloseReason(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 100), "x" + strings.Repeat("€", 60), strings.Repeat("a", 200)} {
		got := truncateString(s, 123)
		if len(got) > 123 || len(got) < 120 || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Errorf("%q -> %q", s, got)
		}
	}
}
