// Package gqlstream serves GraphQL over the connections that stay open: websockets (graphql-transport-ws and the
// legacy graphql-ws, in gqlgen's executor) and event streams (graphql-sse's distinct-connections mode). Streams
// keeps them: it guards their upgrades (origins, shares per client address), pings them and closes them at
// shutdown. The files, one job each: streams (the guard, shares and shutdown), accept (the upgrade), ping
// (liveness), session (the GraphQL session of a websocket), conn (a connection as gqlgen's WebsocketConn),
// protocol (the graphql-transport-ws rules), write (frames to the peer), streamwrite (the subscriptions a
// connection writes itself, and the stream writers), encode (protocol messages without encoding/json), held
// (rendered data handed past gqlgen), optable (a connection's operations), origin (browser origins), sse and
// ssestream (the event-stream transport).
//
// The server's wiring (internal/server) makes one Streams from a Config, adds its Websocket and EventStream
// transports to gqlgen's handler and puts Guard in front of it.
package gqlstream

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Streams accepts websocket connections on gorilla/websocket for its websocket transport (in the shape of
// gqlgen's WebsocketImplementation) and runs event streams. It keeps every open connection and stream so that
// shutdown can close them (http.Server.Shutdown does not touch hijacked connections), and counts them per client
// address.
type Streams struct {
	origins      *originPolicy
	pingInterval time.Duration // websocket (RFC 6455) pings to every peer; one silent for two intervals is dropped
	metrics      Metrics
	clientAddr   func(*http.Request) string // the address maxPerAddr counts (Config.ClientAddr)
	netConn      func(*http.Request) net.Conn
	log          *slog.Logger
	refused      refusedOrigins // the log of refused origins
	maxPerAddr   int            // websockets and streams per client address (0: no bound)
	maxOps       int            // graphql-transport-ws operations in flight per connection (0: no bound)
	// protocolPings: graphql-transport-ws ping messages with every websocket ping (WS_PROTOCOL_PINGS).
	protocolPings bool
	ws            wsTransport
	sse           sseTransport

	writers streamWriters // write the connections' stream responses (streamwrite.go)

	pingOnce sync.Once     // starts pingAll with the first connection
	pingStop chan struct{} // closed by CloseAll: pingAll returns
	stopOnce sync.Once

	mu      sync.Mutex
	conns   map[*wsConn]struct{}
	streams map[*context.CancelFunc]struct{} // running event streams and reserved streams: CloseAll ends them
	perAddr map[string]int
	closing bool
	closeBy time.Time // set with closing: when CloseAll closes the connections whose peers have not answered
	set     Settings  // of connections accepted from now on
}

// Settings are those of the connections and streams accepted from now on. Tune changes them on a running server.
type Settings struct {
	InitTimeout  time.Duration // how long a websocket peer has to send connection_init (Config.InitTimeout); 0: for ever
	WriteTimeout time.Duration // one write to a peer (Config.WriteTimeout)
	// NoStreams: gqlgen writes every response of a subscription, and a connection writes none itself
	// (graph.StreamHolder); tests compare the two ways. Default false.
	NoStreams bool
}

// New returns the transports of cfg.
func New(cfg Config) *Streams {
	cfg = cfg.withDefaults()
	s := &Streams{origins: newOriginPolicy(cfg.CORSOrigins, cfg.PublicOrigins), pingInterval: cfg.PingInterval,
		metrics: cfg.Metrics, clientAddr: cfg.ClientAddr, netConn: cfg.NetConn, log: cfg.Log,
		maxPerAddr: cfg.MaxConnsPerAddr, maxOps: cfg.MaxOpsPerConn, protocolPings: cfg.ProtocolPings,
		conns: map[*wsConn]struct{}{}, perAddr: map[string]int{}, streams: map[*context.CancelFunc]struct{}{},
		pingStop: make(chan struct{}),
		set:      Settings{InitTimeout: cfg.InitTimeout, WriteTimeout: cfg.WriteTimeout}}
	s.ws = wsTransport{ws: s, initFunc: cfg.Init,
		initTimeout: 2 * cfg.InitTimeout, // a backstop: the connection closes first (4408; 1002 on graphql-ws)
		readLimit:   cfg.MaxMessageBytes, onError: cfg.OnError}
	s.sse = sseTransport{streams: s, pingInterval: cfg.PingInterval}
	return s
}

// Websocket is the websocket transport, for gqlgen's handler.
func (s *Streams) Websocket() graphql.Transport { return s.ws }

// EventStream is the event-stream transport, for gqlgen's handler: before its GET and POST transports, which
// would take its requests.
func (s *Streams) EventStream() graphql.Transport { return s.sse }

// Listening records the address the server listens on (websocket origins on loopback names are its port's).
func (s *Streams) Listening(addr net.Addr) { s.origins.listening(addr) }

// Tune changes the settings of the connections and streams accepted from now on.
func (s *Streams) Tune(f func(*Settings)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.set)
}

// Stats are counts of what a Streams holds.
type Stats struct {
	Conns       int // open websocket connections
	Streams     int // running event streams and reserved streams (Reserve)
	Addrs       int // client addresses that hold a share
	OpsInFlight int // operations counted against Config.MaxOpsPerConn, on all graphql-transport-ws connections
}

// Stats counts what s holds now.
func (s *Streams) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Conns: len(s.conns), Streams: len(s.streams), Addrs: len(s.perAddr)}
	for c := range s.conns {
		if c.tws != nil {
			st.OpsInFlight += c.tws.inFlight()
		}
	}
	return st
}

// CheckOrigin answers a page's question whether its origin may open websockets (POST /websocket-origin; a
// browser sends its Origin with every POST): 204, or 403 FORBIDDEN with originRefusal. The dashboard asks when its
// websocket closed before it opened, since a browser shows no page why an upgrade failed.
func (s *Streams) CheckOrigin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		gqlhttp.WriteError(w, http.StatusMethodNotAllowed, string(leaderboard.Invalid),
			"POST only: the browser sends its Origin with it")
		return
	}
	if !s.origins.allowWebsocket(r) {
		gqlhttp.WriteError(w, http.StatusForbidden, string(graph.Forbidden), originRefusal(r.Header.Get("Origin")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Guard rejects websocket upgrades from origins outside the allow-list (403) and from addresses that already
// hold their share of connections (429, RATE_LIMITED). The reservation lasts while the handler runs, which is the
// life of the connection.
func (s *Streams) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsEventStream(r) {
			s.stream(w, r, next)
			return
		}
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !s.origins.allowWebsocket(r) {
			s.metrics.Rejected.WithLabelValues("origin").Inc()
			s.refused.log(s.log, r.Header.Get("Origin"))
			gqlhttp.WriteError(w, http.StatusForbidden, string(graph.Forbidden), originRefusal(r.Header.Get("Origin")))
			return
		}
		addr := s.clientAddr(r)
		if !s.reserve(w, addr, nil) {
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

// reserve takes one of addr's maxPerAddr shares (websockets, event streams and reserved streams count alike) and
// registers stream (nil for a websocket) for CloseAll; when it cannot, it answers the request (503 while shutting
// down, 429 RATE_LIMITED over the limit) and returns false.
func (s *Streams) reserve(w http.ResponseWriter, addr string, stream *context.CancelFunc) bool {
	s.mu.Lock()
	closing, full := s.closing, s.maxPerAddr > 0 && s.perAddr[addr] >= s.maxPerAddr
	if !closing && !full {
		s.perAddr[addr]++
		if stream != nil {
			s.streams[stream] = struct{}{}
		}
	}
	s.mu.Unlock()
	switch {
	case closing:
		gqlhttp.WriteError(w, http.StatusServiceUnavailable, string(leaderboard.Unavailable), "server shutting down")
	case full:
		s.metrics.Rejected.WithLabelValues("per_address_limit").Inc()
		gqlhttp.WriteError(w, http.StatusTooManyRequests, string(leaderboard.RateLimited),
			"too many websocket connections, event streams and exports from this address")
	}
	return !closing && !full
}

// Reserve takes one of addr's shares (Config.MaxConnsPerAddr) for a long-lived response of the server's own (an
// export) and registers cancel, which CloseAll calls at shutdown; when it cannot, it answers the request (503
// while shutting down, 429 RATE_LIMITED over the limit) and returns false. Release gives the share back.
func (s *Streams) Reserve(w http.ResponseWriter, addr string, cancel *context.CancelFunc) bool {
	return s.reserve(w, addr, cancel)
}

// release gives back a connection's share of its address.
func (s *Streams) release(addr string) {
	s.mu.Lock()
	if s.perAddr[addr]--; s.perAddr[addr] <= 0 {
		delete(s.perAddr, addr)
	}
	s.mu.Unlock()
}

// Release gives back the share of a stream that Reserve registered.
func (s *Streams) Release(addr string, cancel *context.CancelFunc) {
	s.mu.Lock()
	delete(s.streams, cancel)
	s.mu.Unlock()
	s.release(addr)
}

// stream runs a server-sent-events request (see sse.go) like a websocket: counted against its address, and ended
// by CloseAll (its context is cancelled).
func (s *Streams) stream(w http.ResponseWriter, r *http.Request, next http.Handler) {
	addr := s.clientAddr(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !s.reserve(w, addr, &cancel) {
		return
	}
	defer s.Release(addr, &cancel)
	next.ServeHTTP(w, r.WithContext(ctx))
}

// CloseAll sends every open connection a going-away close frame, gives the peers until one CloseLinger after
// the first call to answer with theirs (the connection's reader closes it then), and closes the connections
// still open at that deadline; later upgrades are refused. It returns when every connection it found is closed.
//
// It runs twice on shutdown, concurrently: from http.Server.Shutdown (RegisterOnShutdown starts it in a
// goroutine) and from Serve after Shutdown. Both calls share the deadline, and neither closes a connection before
// its close frame has been written (writeClose).
func (s *Streams) CloseAll() {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.closeBy = time.Now().Add(CloseLinger)
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

// streamWriteTimeout is the write timeout of a stream opened now: the websockets' (Settings.WriteTimeout; Tune
// changes it on a running server).
func (s *Streams) streamWriteTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.WriteTimeout
}
