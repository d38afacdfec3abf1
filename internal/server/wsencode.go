package server

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsMessage is one of gqlgen's protocol messages.
type wsMessage struct {
	payload []byte
	id, typ string
}

// encodeMessage writes gqlgen's protocol messages ({payload, id, type}) without encoding/json: their payload is a
// json.RawMessage that gqlgen has just produced with json.Marshal, and encoding/json would validate and compact
// it again for every subscriber (a quarter of the server's CPU with 10,000 subscribers). Any other value, or a
// message type it does not recognise, is left to encoding/json (ok false).
func encodeMessage(v any) ([]byte, bool) {
	m, ok := protocolFields(v)
	if !ok {
		return nil, false
	}
	return appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, m.id, m.typ), true
}

// protocolFields reads one of gqlgen's protocol messages (see isProtocolMessage).
func protocolFields(v any) (wsMessage, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || !isProtocolMessage(rv.Type()) {
		return wsMessage{}, false
	}
	typ := rv.Field(2)
	text := typ.String()
	if tm, ok := typ.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		if err != nil {
			return wsMessage{}, false
		}
		text = string(b)
	}
	return wsMessage{payload: rv.Field(0).Bytes(), id: rv.Field(1).String(), typ: text}, true
}

var protocolMessages sync.Map // reflect.Type -> bool

// isProtocolMessage reports whether t is shaped like gqlgen's websocket messages: Payload json.RawMessage
// `json:"payload,omitempty"`, ID string `json:"id,omitempty"`, Type (a string kind) `json:"type"`, then only
// unexported fields.
func isProtocolMessage(t reflect.Type) bool {
	if v, ok := protocolMessages.Load(t); ok {
		return v.(bool)
	}
	ok := t.NumField() >= 3 &&
		t.Field(0).Type == reflect.TypeFor[json.RawMessage]() && t.Field(0).Tag.Get("json") == "payload,omitempty" &&
		t.Field(1).Type.Kind() == reflect.String && t.Field(1).Tag.Get("json") == "id,omitempty" &&
		t.Field(2).Type.Kind() == reflect.String && t.Field(2).Tag.Get("json") == "type" &&
		!t.Field(2).Type.Implements(reflect.TypeFor[json.Marshaler]())
	for i := 3; ok && i < t.NumField(); i++ {
		ok = !t.Field(i).IsExported()
	}
	protocolMessages.Store(t, ok)
	return ok
}

func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(buf, b...)
}

// WriteClose sends a close frame, the first time only: the peer gets one close frame, with the first code.
func (c *wsConn) WriteClose(code int, message string) error {
	return c.writeClose(code, message, time.Now().Add(time.Second))
}

// writeClose sends a close frame, written by deadline, unless one has been sent already. It returns once the
// frame sent first has been written (or its write failed), also to a caller that did not send it: the caller may
// then close the connection without cutting off the frame. (gqlgen, for one, calls WriteClose and then Close.)
func (c *wsConn) writeClose(code int, message string, deadline time.Time) error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closeSent.Load() {
		return nil
	}
	c.closeSent.Store(true) // from now on nothing else is written
	// A close frame's reason is at most 123 bytes, and must be valid UTF-8.
	message = truncateString(message, 123)
	if !c.wl.lockBy(deadline) {
		return errWSClosing // a write to a peer that does not read holds the lock; the caller closes
	}
	defer c.wl.unlock()
	payload := websocket.FormatCloseMessage(code, message)
	bp := getFrameBuf()
	defer putFrameBuf(bp)
	*bp = append(appendFrameHeader((*bp)[:0], opClose, len(payload)), payload...)
	return c.flushLocked(*bp, deadline)
}

func (c *wsConn) Subprotocol() string      { return c.ws.Subprotocol() }
func (c *wsConn) SetReadLimit(limit int64) { c.ws.SetReadLimit(limit) }

// SetReadDeadline is gqlgen's pong deadline (unused: MissingPongOk); while we close, the linger deadline stands.
func (c *wsConn) SetReadDeadline(t time.Time) error {
	if c.closeSent.Load() {
		return nil
	}
	return c.ws.SetReadDeadline(t)
}

func (c *wsConn) Close() error {
	var err error
	c.once.Do(func() {
		c.stopInitTimer()
		close(c.done)
		err = c.ws.Close()
		c.owner.mu.Lock()
		delete(c.owner.conns, c)
		c.owner.mu.Unlock()
		c.owner.metrics.wsConns.Dec()
	})
	return err
}

// watchPongs makes the peer's answers to websocket (RFC 6455 control frame) pings keep the connection: it is
// dropped when it has answered none for two intervals. Every websocket library answers them by itself, whatever
// its GraphQL protocol, unlike graphql-transport-ws's own ping message, which some clients (genqlient) never
// answer. The pings come from websockets.pingAll.
func (c *wsConn) watchPongs(every time.Duration) {
	extend := func(string) error {
		if c.closeSent.Load() {
			return nil // closing: the linger deadline stands
		}
		return c.ws.SetReadDeadline(time.Now().Add(2 * every))
	}
	c.ws.SetPongHandler(extend)
	_ = extend("")
}

// ping sends one websocket ping; a peer that does not take it within the write timeout is closed.
func (c *wsConn) ping() {
	if c.closeSent.Load() {
		return // closing: gorilla fails writes after the close frame, and the linger must run its course
	}
	_ = c.send(opPing, nil) // a failed write closes the connection
}
