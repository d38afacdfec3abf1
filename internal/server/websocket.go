package server

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
)

const (
	// wsWriteTimeout bounds one write to a websocket peer. A write that fails (a peer that stopped reading)
	// closes the connection.
	wsWriteTimeout = 10 * time.Second
	// wsInitTimeout: a peer that has not sent connection_init by then is closed, with 4408 (graphql-transport-ws)
	// or, as gqlgen did, 1002 (graphql-ws). gqlgen's own InitTimeout must be longer.
	wsInitTimeout = 10 * time.Second
	// wsCloseLinger is how long a connection that we close waits for the peer's close frame, discarding what the
	// peer still sends, before the TCP connection is closed: closing it with unread input would reset it, and
	// the peer could lose the close frame with its code. On shutdown it is one wait shared by all connections.
	wsCloseLinger = time.Second
)

// websockets is gqlgen's WebsocketImplementation on gorilla/websocket. It keeps every open connection so that
// shutdown can close them (http.Server.Shutdown does not touch hijacked connections), and counts connections per
// client address.
type websockets struct {
	origins      *originPolicy
	pingInterval time.Duration // for graphql-ws peers, which have no protocol-level ping: websocket pings
	metrics      *Metrics

	mu      sync.Mutex
	conns   map[*wsConn]struct{}
	perAddr map[string]int
	closing bool
	closeBy time.Time // set with closing: when closeAll closes the connections whose peers have not answered
	// Settings of connections accepted from now on (guarded by mu: tests change them on a running server).
	initTimeout  time.Duration // wsInitTimeout
	writeTimeout time.Duration // wsWriteTimeout
	maxOps       int           // graphql-transport-ws operations in flight per connection (0: no bound)
}

// newWebsockets: maxOps bounds the operations in flight on one graphql-transport-ws connection
// (MAX_SUBSCRIPTIONS_PER_CONN); initTimeout is how long a peer has to send connection_init.
func newWebsockets(origins *originPolicy, pingInterval, initTimeout time.Duration, maxOps int, m *Metrics) *websockets {
	return &websockets{origins: origins, pingInterval: pingInterval, metrics: m,
		conns: map[*wsConn]struct{}{}, perAddr: map[string]int{},
		initTimeout: initTimeout, writeTimeout: wsWriteTimeout, maxOps: maxOps}
}

var _ transport.WebsocketImplementation = (*websockets)(nil)

// Accept upgrades r. Origin and per-address limits were checked by (*websockets).guard before gqlgen got r.
func (s *websockets) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := websocket.Upgrader{
		Subprotocols:     opts.Subprotocols,
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      func(*http.Request) bool { return true }, // done by guard, with an error body
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			writeError(w, status, codeInvalid, "websocket upgrade failed: "+reason.Error())
		},
	}
	ws, err := up.Upgrade(w, r, opts.ResponseHeader)
	if err != nil {
		return nil, err
	}
	// From here on only our own deadlines apply: not the http.Server's ReadTimeout and WriteTimeout, which it
	// set on the connection before it was hijacked.
	_ = ws.NetConn().SetDeadline(time.Time{})
	c := &wsConn{ws: ws, owner: s, done: make(chan struct{})}
	ws.SetCloseHandler(c.onPeerClose)
	if h, ok := r.Context().Value(connHolderKey{}).(*connHolder); ok {
		h.c = c
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return nil, errors.New("server shutting down")
	}
	c.writeTimeout = s.writeTimeout
	if ws.Subprotocol() == "graphql-transport-ws" {
		c.tws = newTransportState(s.maxOps)
	}
	if s.initTimeout > 0 {
		c.initTimer = time.AfterFunc(s.initTimeout, c.initExpired)
	}
	s.conns[c] = struct{}{} // closeAll may close c from now on
	s.mu.Unlock()
	s.metrics.wsConns.Inc()
	if c.tws == nil && s.pingInterval > 0 {
		go c.pingLoop(s.pingInterval)
	}
	return c, nil
}

// guard rejects websocket upgrades from origins outside the allow-list (403) and from addresses that already
// hold their share of connections (429, RATE_LIMITED). The reservation lasts while the handler runs, which for
// gqlgen's websocket transport is the life of the connection.
func (s *websockets) guard(maxPerAddr int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !s.origins.allowWebsocket(r) {
			s.metrics.wsRejected.WithLabelValues("origin").Inc()
			writeError(w, http.StatusForbidden, codeForbidden, "origin not allowed")
			return
		}
		addr := clientAddr(r)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "server shutting down")
			return
		}
		if maxPerAddr > 0 && s.perAddr[addr] >= maxPerAddr {
			s.mu.Unlock()
			s.metrics.wsRejected.WithLabelValues("per_address_limit").Inc()
			writeError(w, http.StatusTooManyRequests, codeRateLimited, "too many websocket connections from this address")
			return
		}
		s.perAddr[addr]++
		s.mu.Unlock()
		holder := &connHolder{}
		r = r.WithContext(context.WithValue(r.Context(), connHolderKey{}, holder))
		defer func() {
			// gqlgen returns when the connection is over, but leaves it open on some init failures.
			if holder.c != nil {
				holder.c.Close()
			}
			s.mu.Lock()
			if s.perAddr[addr]--; s.perAddr[addr] <= 0 {
				delete(s.perAddr, addr)
			}
			s.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// connHolder lets guard close the connection that Accept made for its request.
type connHolder struct{ c *wsConn }

type connHolderKey struct{}

// closeAll sends every open connection a going-away close frame, gives the peers until one wsCloseLinger after
// the first call to answer with theirs (the connection's reader closes it then), and closes the connections
// still open at that deadline; later upgrades are refused. It returns when every connection it found is closed.
//
// It runs twice on shutdown, concurrently: from http.Server.Shutdown (RegisterOnShutdown starts it in a
// goroutine) and from Serve after Shutdown. Both calls share the deadline, and neither closes a connection before
// its close frame has been written (writeClose).
func (s *websockets) closeAll() {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.closeBy = time.Now().Add(wsCloseLinger)
	}
	deadline := s.closeBy
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	// One goroutine per connection: a peer that does not read can hold up its close frame until the deadline,
	// and must not hold up the others'.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.shutdown(deadline)
		}()
	}
	wg.Wait()
}

// shutdown sends the going-away close frame (unless a close frame has gone already), waits until deadline for
// the connection to end (its reader, in NextReader, discards what the peer still sends and ends at the peer's
// close frame or the deadline), then closes it.
func (c *wsConn) shutdown(deadline time.Time) {
	_ = c.writeClose(websocket.CloseGoingAway, "server shutting down", deadline)
	_ = c.ws.SetReadDeadline(deadline)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	c.Close()
}

// wsConn adapts a gorilla connection to gqlgen's WebsocketConn. On graphql-transport-ws it enforces the protocol
// (tws, wsprotocol.go): gqlgen reads only checked messages and writes through it.
type wsConn struct {
	ws           *websocket.Conn
	owner        *websockets
	tws          *transportState // nil on graphql-ws
	writeTimeout time.Duration
	initTimer    *time.Timer // closes a peer that sends no connection_init in time
	wmu          sync.Mutex  // gorilla allows one concurrent writer
	once         sync.Once
	done         chan struct{}
	// closeSent: a close frame has gone to the peer (or the peer's was answered). Nothing more is written, and
	// what the peer still sends is discarded.
	closeSent atomic.Bool
	// closeMu is held while the close frame is written: whoever finds closeSent set (under closeMu) knows the
	// frame has been written, or its write has failed, and may close the connection.
	closeMu   sync.Mutex
	firstRead atomic.Bool // graphql-ws: a message has arrived (gqlgen's init timeout counted any message)
}

var errWSClosing = errors.New("websocket: connection closing")

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

// NextReader returns the next message for gqlgen. On graphql-transport-ws that is a checked, re-encoded message
// (transportState.inbound): violations close the connection with the protocol's codes, and messages that gqlgen
// must not act on are answered or dropped here.
func (c *wsConn) NextReader() (int, io.Reader, error) {
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return typ, nil, c.readError(err)
		}
		if c.closeSent.Load() {
			// We are closing: wait for the peer's close frame (or the linger deadline).
			if _, err := io.Copy(io.Discard, r); err != nil {
				return typ, nil, c.readError(err)
			}
			continue
		}
		if c.tws == nil {
			if c.firstRead.CompareAndSwap(false, true) {
				c.stopInitTimer()
			}
			return typ, r, nil
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return typ, nil, c.readError(err)
		}
		in := c.tws.inbound(data)
		switch {
		case in.closeCode != 0:
			return typ, nil, c.fail(in.closeCode, in.closeReason)
		case in.reply != nil:
			if err := c.write(in.reply); err != nil {
				return typ, nil, err
			}
		case in.forward != nil:
			if in.initialised {
				c.stopInitTimer()
			}
			return typ, bytes.NewReader(in.forward), nil
		}
	}
}

// readError translates a read error for gqlgen: ErrWebsocketClosed for an orderly end, which gqlgen does not
// report.
func (c *wsConn) readError(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseNoStatusReceived, websocket.CloseGoingAway) {
		return transport.ErrWebsocketClosed
	}
	if errors.Is(err, websocket.ErrReadLimit) {
		// gorilla has already sent the peer a 1009 (message too big) close frame.
		c.closeSent.Store(true)
		return transport.ErrWebsocketClosed
	}
	if c.closeSent.Load() {
		return transport.ErrWebsocketClosed // the end of a close we started
	}
	return err
}

// fail closes the connection for a protocol violation: a close frame with code, then (this is the reading
// goroutine) what the peer still sends is discarded until its close frame or wsCloseLinger, then the connection
// is closed.
func (c *wsConn) fail(code int, reason string) error {
	_ = c.WriteClose(code, reason)
	_ = c.ws.SetReadDeadline(time.Now().Add(wsCloseLinger))
	for {
		_, r, err := c.ws.NextReader()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			break
		}
	}
	c.Close()
	return transport.ErrWebsocketClosed
}

// initExpired closes a connection that has not sent connection_init within the init timeout.
func (c *wsConn) initExpired() {
	code, reason := closeInitTimeout, "Connection initialisation timeout"
	if c.tws == nil {
		if c.firstRead.Load() {
			return
		}
		code, reason = websocket.CloseProtocolError, "connection initialisation timeout" // gqlgen's
	} else if !c.tws.expire() {
		return
	}
	_ = c.WriteClose(code, reason)
	// The reader (gqlgen's init, in NextReader) discards until the peer's close frame or this deadline.
	_ = c.ws.SetReadDeadline(time.Now().Add(wsCloseLinger))
}

func (c *wsConn) stopInitTimer() {
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
}

// onPeerClose answers the peer's close frame unless we have sent ours already.
func (c *wsConn) onPeerClose(code int, _ string) error {
	_ = c.writeClose(code, "", time.Now().Add(time.Second))
	return nil
}

// WriteJSON writes one of gqlgen's messages. On graphql-transport-ws the operation id is mapped back to the
// peer's (transportState.outbound), and messages the peer must not get are dropped.
func (c *wsConn) WriteJSON(v any) error {
	m, ok := protocolFields(v)
	if c.tws == nil {
		if !ok {
			return c.writeWith(func() error { return c.ws.WriteJSON(v) })
		}
		return c.write(appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, m.id, m.typ))
	}
	if !ok {
		// Not shaped like gqlgen's messages (a gqlgen upgrade?): read back what encoding/json makes of it.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var d struct {
			Payload json.RawMessage `json:"payload"`
			ID      string          `json:"id"`
			Type    string          `json:"type"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		m = wsMessage{payload: d.Payload, id: d.ID, typ: d.Type}
	}
	id, send := c.tws.outbound(m.typ, m.id)
	if !send {
		return nil
	}
	return c.write(appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, id, m.typ))
}

// write sends one text message within the write timeout. A failed write closes the connection: gorilla fails
// every later write too, and a peer that stopped reading must not keep the connection (gqlgen only reports write
// errors).
func (c *wsConn) write(msg []byte) error {
	return c.writeWith(func() error { return c.ws.WriteMessage(websocket.TextMessage, msg) })
}

func (c *wsConn) writeWith(w func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent.Load() {
		return errWSClosing
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if err := w(); err != nil {
		c.Close()
		return err
	}
	return nil
}

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
	return c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, message), deadline)
}

func (c *wsConn) Subprotocol() string      { return c.ws.Subprotocol() }
func (c *wsConn) SetReadLimit(limit int64) { c.ws.SetReadLimit(limit) }

// SetReadDeadline is gqlgen's pong deadline; while we close, the linger deadline stands.
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

// pingLoop sends websocket pings to a graphql-ws peer and drops it when it has been silent (no pong, no message)
// for two intervals. graphql-transport-ws peers get protocol pings from gqlgen instead.
func (c *wsConn) pingLoop(every time.Duration) {
	extend := func(string) error {
		if c.closeSent.Load() {
			return nil // closing: the linger deadline stands
		}
		return c.ws.SetReadDeadline(time.Now().Add(2 * every))
	}
	c.ws.SetPongHandler(extend)
	_ = extend("")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.closeSent.Load() {
				continue // closing: gorilla fails writes after the close frame, and the linger must run its course
			}
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				c.Close()
				return
			}
		}
	}
}

// clientAddr is the client's IP address (the peer of the TCP connection; proxies' headers are not trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
