package main

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
)

// wsWriteTimeout bounds one write to a websocket peer, so a peer that stops reading cannot block the writer.
const wsWriteTimeout = 10 * time.Second

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
}

func newWebsockets(origins *originPolicy, pingInterval time.Duration, m *Metrics) *websockets {
	return &websockets{origins: origins, pingInterval: pingInterval, metrics: m,
		conns: map[*wsConn]struct{}{}, perAddr: map[string]int{}}
}

var _ transport.WebsocketImplementation = (*websockets)(nil)

// Accept upgrades r. Origin and per-address limits were checked by (*websockets).guard before gqlgen got r.
func (s *websockets) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := websocket.Upgrader{
		Subprotocols:     opts.Subprotocols,
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      func(*http.Request) bool { return true }, // done by guard, with an error body
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			writeError(w, status, "BAD_USER_INPUT", "websocket upgrade failed: "+reason.Error())
		},
	}
	ws, err := up.Upgrade(w, r, opts.ResponseHeader)
	if err != nil {
		return nil, err
	}
	c := &wsConn{ws: ws, owner: s, done: make(chan struct{})}
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
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.metrics.wsConns.Inc()
	if ws.Subprotocol() != "graphql-transport-ws" && s.pingInterval > 0 {
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
			writeError(w, http.StatusForbidden, "FORBIDDEN", "origin not allowed")
			return
		}
		addr := clientAddr(r)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "server shutting down")
			return
		}
		if maxPerAddr > 0 && s.perAddr[addr] >= maxPerAddr {
			s.mu.Unlock()
			s.metrics.wsRejected.WithLabelValues("per_address_limit").Inc()
			writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "too many websocket connections from this address")
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

// closeAll sends every open connection a going-away close frame and closes it; later upgrades are refused.
func (s *websockets) closeAll() {
	s.mu.Lock()
	s.closing = true
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.WriteClose(websocket.CloseGoingAway, "server shutting down")
		c.Close()
	}
}

// wsConn adapts a gorilla connection to gqlgen's WebsocketConn.
type wsConn struct {
	ws    *websocket.Conn
	owner *websockets
	wmu   sync.Mutex // gorilla allows one concurrent writer
	once  sync.Once
	done  chan struct{}
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

func (c *wsConn) NextReader() (int, io.Reader, error) {
	typ, r, err := c.ws.NextReader()
	if err != nil {
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseNoStatusReceived, websocket.CloseGoingAway) {
			return typ, nil, transport.ErrWebsocketClosed
		}
		if errors.Is(err, websocket.ErrReadLimit) {
			// gorilla has already sent the peer a 1009 (message too big) close frame.
			return typ, nil, transport.ErrWebsocketClosed
		}
		return typ, nil, err
	}
	return typ, r, nil
}

func (c *wsConn) WriteJSON(v any) error {
	msg, ok := encodeMessage(v)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	if ok {
		return c.ws.WriteMessage(websocket.TextMessage, msg)
	}
	return c.ws.WriteJSON(v)
}

// encodeMessage writes gqlgen's protocol messages ({payload, id, type}) without encoding/json: their payload is a
// json.RawMessage that gqlgen has just produced with json.Marshal, and encoding/json would validate and compact
// it again for every subscriber (a quarter of the server's CPU with 10,000 subscribers). Any other value, or a
// message type it does not recognise, is left to encoding/json (ok false).
func encodeMessage(v any) ([]byte, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || !isProtocolMessage(rv.Type()) {
		return nil, false
	}
	payload := rv.Field(0).Bytes()
	typ := rv.Field(2)
	text := typ.String()
	if tm, ok := typ.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		if err != nil {
			return nil, false
		}
		text = string(b)
	}
	buf := make([]byte, 0, len(payload)+64)
	buf = append(buf, '{')
	if len(payload) > 0 {
		buf = append(buf, `"payload":`...)
		buf = append(buf, payload...)
		buf = append(buf, ',')
	}
	if id := rv.Field(1).String(); id != "" {
		buf = append(buf, `"id":`...)
		buf = appendJSONString(buf, id)
		buf = append(buf, ',')
	}
	buf = append(buf, `"type":`...)
	buf = appendJSONString(buf, text)
	return append(buf, '}'), true
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

func (c *wsConn) WriteClose(code int, message string) error {
	if len(message) > 120 { // a close frame's reason is at most 123 bytes
		message = message[:120]
	}
	return c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, message),
		time.Now().Add(time.Second))
}

func (c *wsConn) Subprotocol() string               { return c.ws.Subprotocol() }
func (c *wsConn) SetReadLimit(limit int64)          { c.ws.SetReadLimit(limit) }
func (c *wsConn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

func (c *wsConn) Close() error {
	var err error
	c.once.Do(func() {
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
	extend := func(string) error { return c.ws.SetReadDeadline(time.Now().Add(2 * every)) }
	c.ws.SetPongHandler(extend)
	_ = extend("")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				c.Close()
				return
			}
		}
	}
}

// originPolicy is the CORS allow-list, applied to websocket upgrades too.
type originPolicy struct {
	any     bool
	allowed []string // lower-case origins, e.g. "https://scores.example.com"
}

func newOriginPolicy(origins []string) *originPolicy {
	p := &originPolicy{}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		p.allowed = append(p.allowed, strings.ToLower(strings.TrimRight(o, "/")))
	}
	return p
}

// allowWebsocket accepts requests without an Origin (not from a browser), same-origin requests, and origins on
// the list.
func (p *originPolicy) allowWebsocket(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return slices.Contains(p.allowed, strings.ToLower(strings.TrimRight(origin, "/")))
}

// clientAddr is the client's IP address (the peer of the TCP connection; proxies' headers are not trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
