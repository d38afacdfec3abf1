package gqlstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/graph"
)

// wsConn adapts a gorilla connection to gqlgen's WebsocketConn. On graphql-transport-ws it enforces the protocol
// (tws, protocol.go): the transport (wsTransport) reads only checked messages and writes through it.
type wsConn struct {
	ws           *websocket.Conn
	owner        *Streams
	tws          *transportState // nil on graphql-ws
	writeTimeout time.Duration
	noStreams    bool            // gqlgen writes every response (Settings.NoStreams)
	initTimer    *time.Timer     // closes a peer that sends no connection_init in time
	wl           writeLock       // held while a frame is written (write.go)
	raw          syscall.RawConn // the socket, for writes that do not wait (writeNow; under wl)
	rawLooked    bool            // raw was looked up (under wl)
	// Streams woken by the hub whose responses are to be written (streamwrite.go), and whether a goroutine is
	// writing them.
	readyMu  sync.Mutex
	ready    []*streamOp
	turn     []*streamOp // the streams of the turn being written (owned by whoever set flushing)
	flushing bool
	// slowUntil: the peer did not take a write in time (streamwrite.go); until then its writes have goroutines of
	// their own.
	slowUntil time.Time
	once      sync.Once
	done      chan struct{}
	// closeSent: a close frame has gone to the peer (or the peer's was answered). Nothing more is written, and
	// what the peer still sends is discarded.
	closeSent atomic.Bool
	// closeMu is held while the close frame is written: whoever finds closeSent set (under closeMu) knows the
	// frame has been written, or its write has failed, and may close the connection.
	closeMu   sync.Mutex
	firstRead atomic.Bool // graphql-ws: a message has arrived (gqlgen's init timeout counted any message)
	held      heldPayloads
	boundMu   sync.Mutex
	bound     map[string]*graph.LiveStream // streams taken over, by gqlgen's operation id (takeBound)
	session   atomic.Pointer[wsSession]    // the GraphQL session, once initialised (keep-alives)
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
		var in inbound
		offStack(func() { in = c.tws.inbound(data) })
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
// goroutine) what the peer still sends is discarded until its close frame or CloseLinger, then the connection
// is closed.
func (c *wsConn) fail(code int, reason string) error {
	_ = c.WriteClose(code, reason)
	_ = c.ws.SetReadDeadline(time.Now().Add(CloseLinger))
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
	_ = c.ws.SetReadDeadline(time.Now().Add(CloseLinger))
}

func (c *wsConn) stopInitTimer() {
	if c.initTimer != nil {
		c.initTimer.Stop()
		c.initTimer = nil // only the connection's reader gets here; an idle connection need not keep the timer
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
	var stream *graph.LiveStream
	if ok && len(m.payload) > 0 {
		m.payload, stream = c.unhold(m.payload)
	}
	if c.tws == nil {
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			return c.write(b)
		}
		err := c.write(appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, m.id, m.typ))
		if err == nil && stream != nil {
			c.bind(stream, m.id, m.id, m.typ)
		}
		return err
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
	err := c.write(appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, id, m.typ))
	if err == nil && stream != nil {
		c.bind(stream, m.id, id, m.typ)
	}
	return err
}

// write sends one text message within the write timeout (send).
func (c *wsConn) write(msg []byte) error { return c.send(opText, msg) }

// offStack runs f on a short-lived goroutine and waits for it; a panic in f goes on in the caller. A connection's
// goroutine lives as long as the connection, parked in the read of its next frame nearly all the time; what it
// does with a message (JSON decoding, the protocol's checks, parsing and validating an operation) needs more
// stack than the read, and a goroutine keeps a stack it grew as long as it uses more than a quarter of it: every
// idle connection kept 8 KiB of stack. With its messages handled off its stack it keeps 4. It costs a goroutine
// start per client message, and those are few.
func offStack(f func()) {
	var p any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		f()
	}()
	<-done
	if p != nil {
		panic(p)
	}
}

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
		c.owner.metrics.Conns.Dec()
	})
	return err
}
