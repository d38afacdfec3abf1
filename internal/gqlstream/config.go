package gqlstream

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what the server's wiring (internal/server) gives the transports. A zero field takes the default
// its comment names; the server fills every field from its own configuration (the environment variable named).
type Config struct {
	// CORSOrigins and PublicOrigins are the browser origins that may open websockets (CORS_ORIGINS, PUBLIC_ORIGIN;
	// "*" allows any). With PublicOrigins empty the listen port on a loopback name is allowed too (see
	// originPolicy). Default: none.
	CORSOrigins, PublicOrigins []string

	// PingInterval is how often every websocket peer gets a websocket ping (and, on graphql-ws, a "ka"); a peer
	// that answers none for two intervals is dropped. An event stream sends a `: ping` comment after this long
	// without an event. Default 0: no pings (WS_PING_INTERVAL; the server's default is 20 s).
	PingInterval time.Duration
	// ProtocolPings adds graphql-transport-ws ping messages to the websocket pings (WS_PROTOCOL_PINGS). Default
	// false.
	ProtocolPings bool
	// InitTimeout is how long a websocket peer has to send connection_init: then it is closed with 4408
	// (graphql-transport-ws) or 1002 (graphql-ws). Default 10 s (DefaultInitTimeout).
	InitTimeout time.Duration
	// WriteTimeout bounds one write to a peer: a websocket frame (or a batch of a connection's stream
	// responses), an event of an event stream. A write that fails closes the connection. Default 10 s
	// (DefaultWriteTimeout).
	WriteTimeout time.Duration

	// MaxOpsPerConn bounds the operations in flight on one graphql-transport-ws connection; a subscribe beyond
	// them is answered RATE_LIMITED (MAX_SUBSCRIPTIONS_PER_CONN). Default 0: no bound.
	MaxOpsPerConn int
	// MaxConnsPerAddr bounds the websockets, event streams and reserved streams (Reserve) of one client address
	// (ClientAddr); one more is answered 429 RATE_LIMITED (MAX_CONNS_PER_ADDR). Default 0: no bound.
	MaxConnsPerAddr int
	// MaxMessageBytes bounds one websocket message from a peer, in bytes: a larger one closes the connection
	// with 1009 (MAX_WS_MESSAGE_BYTES). Default 0: no bound.
	MaxMessageBytes int64

	// ClientAddr is the address MaxConnsPerAddr counts a request against (the server's: its trusted proxies and
	// IPv6 prefix). Default: the host of the request's RemoteAddr.
	ClientAddr func(*http.Request) string
	// NetConn returns the TCP connection a request came on (nil: unknown), so that an event stream whose client
	// stopped reading is reset instead of closed (see sseStream). Default: none.
	NetConn func(*http.Request) net.Conn
	// Init authenticates a websocket connection from its connection_init payload; a refusal can name its close
	// code with WithCloseCode. Default: every connection is accepted.
	Init transport.WebsocketInitFunc
	// OnError hears of websocket read and write errors. Default: none.
	OnError func(ctx context.Context, err error)
	// Log gets refused origins and panics of a connection. Default slog.Default().
	Log *slog.Logger
	// Metrics are where the transports count. Default: nowhere.
	Metrics Metrics
}

// Defaults of Config.
const (
	DefaultInitTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// CloseLinger is how long a connection that we close waits for the peer's close frame, discarding what the peer
// still sends, before the TCP connection is closed: closing it with unread input would reset it, and the peer
// could lose the close frame with its code. On shutdown it is one wait shared by all connections; an event
// stream's last writes get it too.
const CloseLinger = time.Second

// Metrics are the collectors the transports count in, from the server's registry. A nil field is not counted.
type Metrics struct {
	Conns    prometheus.Gauge       // open websocket connections
	Rejected *prometheus.CounterVec // upgrades and streams refused, by reason: "origin", "per_address_limit"
	// Operations counts GraphQL responses by type, root field and outcome: a subscription response that a
	// connection writes itself counts as ("subscription", field, "ok").
	Operations *prometheus.CounterVec
	// CountOperation counts one response (nil: the end of a subscription) of an operation of type typ on root
	// field field, as gqlgen's responses are counted.
	CountOperation func(typ, field string, resp *graphql.Response)
}

// withDefaults returns c with every zero field that has a default set to it.
func (c Config) withDefaults() Config {
	if c.InitTimeout == 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ClientAddr == nil {
		c.ClientAddr = func(r *http.Request) string {
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
				return host
			}
			return r.RemoteAddr
		}
	}
	if c.NetConn == nil {
		c.NetConn = func(*http.Request) net.Conn { return nil }
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	m := &c.Metrics
	if m.Conns == nil {
		m.Conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "uncounted"})
	}
	if m.Rejected == nil {
		m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uncounted"}, []string{"reason"})
	}
	if m.Operations == nil {
		m.Operations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uncounted"},
			[]string{"type", "field", "outcome"})
	}
	if m.CountOperation == nil {
		m.CountOperation = func(string, string, *graphql.Response) {}
	}
	return c
}
