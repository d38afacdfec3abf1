package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
)

const (
	// wsWriteTimeout bounds one write to a websocket peer. A write that fails (a peer that stopped reading)
	// closes the connection.
	wsWriteTimeout = 10 * time.Second
	// wsInitTimeout: a peer that has not sent connection_init by then is closed, with 4408 (graphql-transport-ws)
	// or, as gqlgen did, 1002 (graphql-ws). wsTransport's initTimeout must be longer.
	wsInitTimeout = 10 * time.Second
	// wsCloseLinger is how long a connection that we close waits for the peer's close frame, discarding what the
	// peer still sends, before the TCP connection is closed: closing it with unread input would reset it, and
	// the peer could lose the close frame with its code. On shutdown it is one wait shared by all connections.
	wsCloseLinger = time.Second
	// wsReadBuffer is the size of a websocket connection's read buffer, in bytes: enough for a frame header and
	// a short message in one read (a subscribe of a few hundred bytes takes two or three), and an idle connection
	// holds it for its whole life.
	wsReadBuffer = 256
)

// websockets accepts websocket connections on gorilla/websocket for wsTransport (in the shape of gqlgen's
// WebsocketImplementation). It keeps every open connection so that
// shutdown can close them (http.Server.Shutdown does not touch hijacked connections), and counts connections per
// client address.
type websockets struct {
	origins      *originPolicy
	pingInterval time.Duration // websocket (RFC 6455) pings to every peer; one silent for two intervals is dropped
	metrics      *Metrics
	clientAddr   func(*http.Request) string // the address MAX_CONNS_PER_ADDR counts (see proxies)
	log          *slog.Logger
	refused      refusedOrigins // the log of refused origins

	writers streamWriters // write the connections' stream responses (wswrite.go)

	pingOnce sync.Once     // starts pingAll with the first connection
	pingStop chan struct{} // closed by closeAll: pingAll returns
	stopOnce sync.Once

	mu      sync.Mutex
	conns   map[*wsConn]struct{}
	streams map[*context.CancelFunc]struct{} // running event streams (sse.go): closeAll ends them
	perAddr map[string]int
	closing bool
	closeBy time.Time // set with closing: when closeAll closes the connections whose peers have not answered
	// Settings of connections accepted from now on (guarded by mu: tests change them on a running server).
	initTimeout  time.Duration // wsInitTimeout
	writeTimeout time.Duration // wsWriteTimeout
	maxOps       int           // graphql-transport-ws operations in flight per connection (0: no bound)
	noStreams    bool          // gqlgen writes every response (tests compare the two ways; graph.StreamHolder)
	// protocolPings: graphql-transport-ws ping messages with every websocket ping (WS_PROTOCOL_PINGS); set
	// before the first connection.
	protocolPings bool
}

// newWebsockets: maxOps bounds the operations in flight on one graphql-transport-ws connection
// (MAX_SUBSCRIPTIONS_PER_CONN); initTimeout is how long a peer has to send connection_init.
func newWebsockets(origins *originPolicy, pingInterval, initTimeout time.Duration, maxOps int, m *Metrics) *websockets {
	return &websockets{origins: origins, pingInterval: pingInterval, metrics: m, clientAddr: proxies{}.clientAddr,
		conns: map[*wsConn]struct{}{}, perAddr: map[string]int{}, streams: map[*context.CancelFunc]struct{}{},
		pingStop: make(chan struct{}), log: slog.Default(),
		initTimeout: initTimeout, writeTimeout: wsWriteTimeout, maxOps: maxOps}
}

var _ transport.WebsocketImplementation = (*websockets)(nil)

// Accept upgrades r. Origin and per-address limits were checked by (*websockets).guard before gqlgen got r.
func (s *websockets) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := websocket.Upgrader{
		Subprotocols:     opts.Subprotocols,
		HandshakeTimeout: 10 * time.Second,
		// Frames are written by wsConn (wswrite.go), not by gorilla: no write buffer of its own per connection.
		WriteBufferPool: unusedWriteBuffers,
		// A client's messages are small (connection_init, subscribe, complete): a read buffer of wsReadBuffer
		// instead of net/http's 4 KiB one, which an idle connection held for its whole life. Larger messages
		// are read in several pieces.
		ReadBufferSize: wsReadBuffer,
		CheckOrigin:    func(*http.Request) bool { return true }, // done by guard, with an error body
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
	c := &wsConn{ws: ws, owner: s, done: make(chan struct{}), wl: make(writeLock, 1)}
	ws.SetCloseHandler(c.onPeerClose)
	ws.SetPingHandler(c.onPeerPing)
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
	c.noStreams = s.noStreams
	if ws.Subprotocol() == "graphql-transport-ws" {
		c.tws = newTransportState(s.maxOps)
	}
	if s.initTimeout > 0 {
		c.initTimer = time.AfterFunc(s.initTimeout, c.initExpired)
	}
	s.conns[c] = struct{}{} // closeAll may close c from now on
	s.mu.Unlock()
	s.metrics.wsConns.Inc()
	if s.pingInterval > 0 {
		c.watchPongs(s.pingInterval)
		s.pingOnce.Do(func() { go s.pingAll() })
	}
	if h, ok := r.Context().Value(connHolderKey{}).(*connHolder); ok && h.upgraded != nil {
		close(h.upgraded)
	}
	return c, nil
}

// guard rejects websocket upgrades from origins outside the allow-list (403) and from addresses that already
// hold their share of connections (429, RATE_LIMITED). The reservation lasts while the handler runs, which is the
// life of the connection.
func (s *websockets) guard(maxPerAddr int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isSSE(r) {
			s.stream(maxPerAddr, w, r, next)
			return
		}
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !s.origins.allowWebsocket(r) {
			s.metrics.wsRejected.WithLabelValues("origin").Inc()
			s.refused.log(s.log, r.Header.Get("Origin"))
			writeError(w, http.StatusForbidden, codeForbidden, originRefusal(r.Header.Get("Origin")))
			return
		}
		addr := s.clientAddr(r)
		if !s.reserve(w, addr, maxPerAddr, nil) {
			return
		}
		// The connection runs in a goroutine of its own, and this handler returns as soon as it is upgraded:
		// net/http's goroutine then ends and lets go of the connection's HTTP buffers and response (~7 KiB that
		// an idle websocket held for its whole life). Its context must outlive the request's, which net/http
		// cancels when the handler returns.
		holder := &connHolder{upgraded: make(chan struct{}), log: s.log, release: func() { s.release(addr) }}
		r = r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), connHolderKey{}, holder))
		finished := make(chan struct{})
		uw := &upgradeWriter{w: w} // the goroutine must not hold w: it would keep net/http's connection state
		go func(r *http.Request) {
			defer close(finished)
			holder.serve(func() { next.ServeHTTP(uw, r) })
		}(r)
		select {
		case <-holder.upgraded: // w is not written any more
			uw.release()
		case <-finished:
		}
	})
}

// pingWorkers bounds the goroutines of one ping round: a peer whose socket is full holds one of them up to the
// write timeout, and must not hold up the pings of the others.
const pingWorkers = 16

// pingAll pings every connection each pingInterval, from this goroutine and pingWorkers short-lived ones per
// round, so that an idle connection costs no goroutine of its own for its liveness (see watchPongs).
func (s *websockets) pingAll() {
	t := time.NewTicker(s.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.pingStop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		conns := make([]*wsConn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		protocolPings := s.protocolPings
		work := make(chan *wsConn)
		var wg sync.WaitGroup
		for range min(pingWorkers, len(conns)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range work {
					c.ping()
					if s := c.session.Load(); s != nil {
						s.keepAlive(protocolPings)
					}
				}
			}()
		}
		for _, c := range conns {
			work <- c
		}
		close(work)
		wg.Wait()
	}
}

// reserve takes one of addr's maxPerAddr connections (websockets and event streams count alike) and registers
// stream (nil for a websocket) for closeAll; when it cannot, it answers the request (503 while shutting down,
// 429 RATE_LIMITED over the limit) and returns false.
func (s *websockets) reserve(w http.ResponseWriter, addr string, maxPerAddr int, stream *context.CancelFunc) bool {
	s.mu.Lock()
	closing, full := s.closing, maxPerAddr > 0 && s.perAddr[addr] >= maxPerAddr
	if !closing && !full {
		s.perAddr[addr]++
		if stream != nil {
			s.streams[stream] = struct{}{}
		}
	}
	s.mu.Unlock()
	switch {
	case closing:
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "server shutting down")
	case full:
		s.metrics.wsRejected.WithLabelValues("per_address_limit").Inc()
		writeError(w, http.StatusTooManyRequests, codeRateLimited,
			"too many websocket connections, event streams and exports from this address")
	}
	return !closing && !full
}

// release gives back a connection's share of its address.
func (s *websockets) release(addr string) {
	s.mu.Lock()
	if s.perAddr[addr]--; s.perAddr[addr] <= 0 {
		delete(s.perAddr, addr)
	}
	s.mu.Unlock()
}

// releaseStream gives back the share of a stream that reserve registered (an export; see export.go).
func (s *websockets) releaseStream(addr string, stream *context.CancelFunc) {
	s.mu.Lock()
	delete(s.streams, stream)
	s.mu.Unlock()
	s.release(addr)
}

// stream runs a server-sent-events request (see sse.go) like a websocket: counted against its address, and ended
// by closeAll (its context is cancelled).
func (s *websockets) stream(maxPerAddr int, w http.ResponseWriter, r *http.Request, next http.Handler) {
	addr := s.clientAddr(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !s.reserve(w, addr, maxPerAddr, &cancel) {
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.streams, &cancel)
		s.mu.Unlock()
		s.release(addr)
	}()
	next.ServeHTTP(w, r.WithContext(ctx))
}

// connHolder lets guard close the connection that Accept made for its request; upgraded is closed once Accept
// has made it. release gives back the connection's share of its address.
type connHolder struct {
	c        *wsConn
	upgraded chan struct{}
	log      *slog.Logger
	release  func()
	// handedOff: the connection goes on in a goroutine of its own (handOff), which ends it. Set and read on the
	// upgrade's goroutine.
	handedOff bool
}

// serve runs f, the upgrade's handler chain, and ends the connection when f returns or panics, unless f has
// handed the connection off.
func (h *connHolder) serve(f func()) {
	defer func() { h.end(recover(), !h.handedOff) }()
	f()
}

// handOff goes on with the connection in f on a goroutine of its own, which ends the connection when f returns,
// and lets the handler chain that upgraded it return. An idle connection's goroutine is parked in the read of the
// next frame for the connection's life; started here, nothing below the session's frames holds on to the upgrade
// request, its headers and contexts (gqlgen's handler keeps the request in a deferred recover while it runs).
// Its stack stays 4 KiB: the parked read path alone is more than a 2 KiB stack holds.
func (h *connHolder) handOff(f func()) {
	h.handedOff = true
	go func() {
		defer func() { h.end(recover(), true) }()
		f()
	}()
}

// end logs a panic v of the connection's handler and, with close, closes the connection (the transport returns
// when the connection is over, but leaves it open on some init failures) and releases its address's share.
func (h *connHolder) end(v any, close bool) {
	if v != nil {
		h.log.Error("websocket connection panicked", "panic", v, "stack", string(debug.Stack()))
	}
	if !close {
		return
	}
	if h.c != nil {
		h.c.Close()
	}
	h.release()
}

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
	s.stopOnce.Do(func() { close(s.pingStop) })
	for cancel := range s.streams {
		(*cancel)() // the stream sends its complete event and ends
	}
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

// upgradeWriter is the ResponseWriter a websocket upgrade runs with. Once the connection is upgraded it lets go
// of net/http's response, which references the connection's HTTP buffers (8 KiB): the handlers of a websocket
// keep their ResponseWriter for the connection's life. After release it writes nothing.
type upgradeWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (u *upgradeWriter) get() http.ResponseWriter {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.w
}

func (u *upgradeWriter) release() {
	u.mu.Lock()
	u.w = nil
	u.mu.Unlock()
}

func (u *upgradeWriter) Header() http.Header {
	if w := u.get(); w != nil {
		return w.Header()
	}
	return http.Header{}
}

func (u *upgradeWriter) Write(b []byte) (int, error) {
	if w := u.get(); w != nil {
		return w.Write(b)
	}
	return 0, http.ErrHijacked
}

func (u *upgradeWriter) WriteHeader(status int) {
	if w := u.get(); w != nil {
		w.WriteHeader(status)
	}
}

func (u *upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := u.get().(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, http.ErrHijacked
}
