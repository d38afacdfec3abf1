// Package wstest is a GraphQL-over-websocket client for tests. It speaks both subprotocols gqlgen serves:
// graphql-transport-ws (the current one: subscribe / next / error / complete, ping / pong) and the legacy
// graphql-ws (start / data / error / complete / stop, ka keep-alives).
//
//	c := wstest.Dial(t, "ws://"+addr+"/graphql", wstest.TransportWS, map[string]any{"authorization": "Bearer k"})
//	c.Subscribe("1", `subscription { topUpdates(board: "b") { version } }`, nil)
//	msg, err := c.Next(ctx) // msg.Type is "next" (or "data" on graphql-ws), "error" or "complete"
//
// Keep-alives ("ka"), pings and pongs are handled by the client and never returned by Next; pings are answered
// with a pong.
package wstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Subprotocols.
const (
	TransportWS = "graphql-transport-ws" // github.com/enisdenjo/graphql-ws, the current protocol
	LegacyWS    = "graphql-ws"           // subscriptions-transport-ws, the legacy protocol
)

// DialTimeout bounds the websocket handshake and the wait for connection_ack in Dial.
const DialTimeout = 10 * time.Second

// Message is one message from the server.
type Message struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Raw     []byte          `json:"-"` // the message as it arrived
}

// IsData reports whether m carries a result: "next" (graphql-transport-ws) or "data" (graphql-ws).
func (m Message) IsData() bool { return m.Type == "next" || m.Type == "data" }

// Error is a GraphQL error as sent in a result or an error message.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Code returns extensions.code, or "".
func (e Error) Code() string { s, _ := e.Extensions["code"].(string); return s }

// Result is the payload of a data message: {data, errors}.
type Result struct {
	Data   json.RawMessage `json:"data"`
	Errors []Error         `json:"errors"`
}

// Result decodes the payload of a data message.
func (m Message) Result() (Result, error) {
	var r Result
	err := json.Unmarshal(m.Payload, &r)
	return r, err
}

// Errors returns the GraphQL errors a message carries: the errors of a data message, or the payload of an error
// message (a list on graphql-transport-ws, one object or a list on graphql-ws).
func (m Message) Errors() []Error {
	switch {
	case m.IsData():
		r, _ := m.Result()
		return r.Errors
	case m.Type == "error" || m.Type == "connection_error":
		var list []Error
		if json.Unmarshal(m.Payload, &list) == nil {
			return list
		}
		var one Error
		if json.Unmarshal(m.Payload, &one) == nil {
			return []Error{one}
		}
	}
	return nil
}

// Conn is a GraphQL websocket connection that has been acknowledged by the server. Its methods are safe for
// concurrent use, but only one goroutine should call Next at a time.
type Conn struct {
	ws          *websocket.Conn
	subprotocol string
	msgs        chan Message
	done        chan struct{} // closed when the reader stops
	err         error         // why the reader stopped; read after done is closed
	wmu         sync.Mutex
	closeOnce   sync.Once
}

// Dial connects to url (ws:// or wss://) with subprotocol (TransportWS or LegacyWS), sends connection_init with
// initPayload (nil: no payload) and waits for connection_ack. It fails the test on any error and closes the
// connection in t's cleanup.
func Dial(t testing.TB, url, subprotocol string, initPayload any) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	c, _, err := DialContext(ctx, url, subprotocol, nil, initPayload)
	if err != nil {
		t.Fatalf("wstest: dial %s (%s): %v", url, subprotocol, err)
	}
	t.Cleanup(c.Close)
	return c
}

// DialContext is Dial for tests that expect failure: it returns the error, and the HTTP response of a refused
// handshake (status, headers) when there was one. header is sent with the handshake (e.g. Origin). An
// init rejected by the server is an error that wraps a *websocket.CloseError (graphql-transport-ws) or
// describes the connection_error payload (graphql-ws). The caller closes the returned Conn.
func DialContext(ctx context.Context, url, subprotocol string, header http.Header, initPayload any) (*Conn, *http.Response, error) {
	d := websocket.Dialer{Subprotocols: []string{subprotocol}, HandshakeTimeout: DialTimeout}
	ws, resp, err := d.DialContext(ctx, url, header)
	if err != nil {
		return nil, resp, err
	}
	c := &Conn{ws: ws, subprotocol: subprotocol, msgs: make(chan Message, 1024), done: make(chan struct{})}
	go c.read()
	init := map[string]any{"type": "connection_init"}
	if initPayload != nil {
		init["payload"] = initPayload
	}
	if err := c.send(init); err != nil {
		c.Close()
		return nil, resp, err
	}
	for {
		m, err := c.Next(ctx)
		if err != nil {
			c.Close()
			return nil, resp, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		switch m.Type {
		case "connection_ack":
			return c, resp, nil
		case "connection_error":
			c.Close()
			return nil, resp, fmt.Errorf("connection_error: %s", m.Payload)
		default:
			c.Close()
			return nil, resp, fmt.Errorf("unexpected %q before connection_ack: %s", m.Type, m.Payload)
		}
	}
}

// Subprotocol returns the subprotocol the server chose.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// Subscribe starts operation id ("subscribe" on graphql-transport-ws, "start" on graphql-ws). vars may be nil.
func (c *Conn) Subscribe(id, query string, vars map[string]any) error {
	typ := "subscribe"
	if c.subprotocol == LegacyWS {
		typ = "start"
	}
	payload := map[string]any{"query": query}
	if vars != nil {
		payload["variables"] = vars
	}
	return c.send(map[string]any{"type": typ, "id": id, "payload": payload})
}

// Stop ends operation id ("complete" on graphql-transport-ws, "stop" on graphql-ws).
func (c *Conn) Stop(id string) error {
	typ := "complete"
	if c.subprotocol == LegacyWS {
		typ = "stop"
	}
	return c.send(map[string]any{"type": typ, "id": id})
}

// Ping sends a graphql-transport-ws ping; the server's pong is swallowed by the reader.
func (c *Conn) Ping() error { return c.send(map[string]any{"type": "ping"}) }

// SendRaw writes one text frame as is, for tests of malformed input.
func (c *Conn) SendRaw(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(DialTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// Next returns the next message other than keep-alives, pings and pongs. When the connection has ended it
// returns the reason: a *websocket.CloseError when the server closed it with a close frame (see CloseCode).
func (c *Conn) Next(ctx context.Context) (Message, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-c.msgs:
		return m, nil
	case <-c.done:
		// Messages read before the end are still delivered.
		select {
		case m := <-c.msgs:
			return m, nil
		default:
		}
		return Message{}, c.err
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// NextData waits for the next message of operation id, which must be a data message without errors, and decodes
// its data into v (may be nil). It fails the test otherwise.
func (c *Conn) NextData(t testing.TB, ctx context.Context, id string, v any) {
	t.Helper()
	m, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("wstest: waiting for data of %q: %v", id, err)
	}
	if m.ID != id || !m.IsData() {
		t.Fatalf("wstest: want data for %q, got %q for %q: %s", id, m.Type, m.ID, m.Payload)
	}
	r, err := m.Result()
	if err != nil {
		t.Fatalf("wstest: decoding payload: %v: %s", err, m.Payload)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("wstest: data for %q has errors: %s", id, m.Payload)
	}
	if v != nil {
		if err := json.Unmarshal(r.Data, v); err != nil {
			t.Fatalf("wstest: decoding data: %v: %s", err, r.Data)
		}
	}
}

// Done is closed when the connection has ended (closed by either side or broken).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection with a normal close frame. It is safe to call more than once.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.wmu.Unlock()
		_ = c.ws.Close()
		<-c.done
	})
}

// CloseCode returns the close code of an error returned by Next or DialContext, or 0 when it is not a close.
func CloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func (c *Conn) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.SendRaw(data)
}

// read delivers messages to c.msgs until the connection ends. If the buffer is full (a test that stopped
// reading) the connection is treated as broken rather than blocking forever.
func (c *Conn) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.err = err
			return
		}
		m := Message{Raw: data}
		if err := json.Unmarshal(data, &m); err != nil {
			c.err = fmt.Errorf("wstest: undecodable message %q: %w", data, err)
			return
		}
		switch m.Type {
		case "ka", "pong":
			continue
		case "ping":
			if err := c.send(map[string]any{"type": "pong"}); err != nil {
				c.err = err
				return
			}
			continue
		}
		select {
		case c.msgs <- m:
		default:
			c.err = errors.New("wstest: more than 1024 unread messages")
			return
		}
	}
}
