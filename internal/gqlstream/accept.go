package gqlstream

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// wsReadBuffer is the size of a websocket connection's read buffer, in bytes: enough for a frame header and a
// short message in one read (a subscribe of a few hundred bytes takes two or three), and an idle connection holds
// it for its whole life.
const wsReadBuffer = 256

var _ transport.WebsocketImplementation = (*Streams)(nil)

// Accept upgrades r. Origin and per-address limits were checked by Guard before gqlgen got r.
func (s *Streams) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := websocket.Upgrader{
		Subprotocols:     opts.Subprotocols,
		HandshakeTimeout: 10 * time.Second,
		// Frames are written by wsConn (write.go), not by gorilla: no write buffer of its own per connection.
		WriteBufferPool: unusedWriteBuffers,
		// A client's messages are small (connection_init, subscribe, complete): a read buffer of wsReadBuffer
		// instead of net/http's 4 KiB one, which an idle connection held for its whole life. Larger messages
		// are read in several pieces.
		ReadBufferSize: wsReadBuffer,
		CheckOrigin:    func(*http.Request) bool { return true }, // done by Guard, with an error body
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			gqlhttp.WriteError(w, status, string(leaderboard.Invalid), "websocket upgrade failed: "+reason.Error())
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
	c.writeTimeout = s.set.WriteTimeout
	c.noStreams = s.set.NoStreams
	if ws.Subprotocol() == "graphql-transport-ws" {
		c.tws = newTransportState(s.maxOps)
	}
	if s.set.InitTimeout > 0 {
		c.initTimer = time.AfterFunc(s.set.InitTimeout, c.initExpired)
	}
	s.conns[c] = struct{}{} // CloseAll may close c from now on
	s.mu.Unlock()
	s.metrics.Conns.Inc()
	if s.pingInterval > 0 {
		c.watchPongs(s.pingInterval)
		s.pingOnce.Do(func() { go s.pingAll() })
	}
	if h, ok := r.Context().Value(connHolderKey{}).(*connHolder); ok && h.upgraded != nil {
		close(h.upgraded)
	}
	return c, nil
}

// connHolder lets Guard close the connection that Accept made for its request; upgraded is closed once Accept
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
