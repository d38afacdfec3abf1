package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

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

// wsOpenConns is the number of websocket connections s has open.
func wsOpenConns(s *testServer) int { return s.App.streams.Stats().Conns }

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
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
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
	s.App.streams.Tune(func(set *gqlstream.Settings) { set.InitTimeout = timeout })
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
			if want := "Subscriber for " + id + " already exists"; r != gqlstream.CloseReason(want) ||
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
