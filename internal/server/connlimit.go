package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connLimit bounds the connections the server holds (MAX_CONNS), websockets included. When a new connection
// would pass the bound, the longest-idle keep-alive connection is closed to make room; when none is idle, the new
// connection is closed at once. It is a net.Listener wrapper plus an http.Server ConnState hook.
type connLimit struct {
	net.Listener
	max     int
	onClose func() // counts refused connections (metrics); may be nil

	mu    sync.Mutex
	open  int
	idle  idleList              // idle keep-alive connections, oldest first
	plain map[net.Conn]struct{} // open and not hijacked (HTTP, not websockets)
}

func newConnLimit(ln net.Listener, max int, onRefuse func()) *connLimit {
	return &connLimit{Listener: ln, max: max, onClose: onRefuse, plain: map[net.Conn]struct{}{}}
}

// idleList is a doubly linked list threaded through the connections themselves: every request moves its
// connection out of it and back in (ConnState), which a container/list and a map from connection to element
// paid with an allocation and two map operations each time.
type idleList struct {
	head, tail *countedConn
}

func (l *idleList) pushBack(c *countedConn) {
	c.inIdle, c.prev, c.next = true, l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *idleList) remove(c *countedConn) {
	if !c.inIdle {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.inIdle, c.prev, c.next = false, nil, nil
}

// Accept returns the next connection within the bound.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.max > 0 && l.open >= l.max {
			if victim := l.idle.head; victim != nil {
				l.idle.remove(victim)
				l.mu.Unlock()
				victim.Close() // its counted close makes room
				l.mu.Lock()
			}
		}
		if l.max > 0 && l.open >= l.max {
			l.mu.Unlock()
			c.Close()
			if l.onClose != nil {
				l.onClose()
			}
			continue
		}
		l.open++
		cc := &countedConn{Conn: c, l: l}
		l.plain[cc] = struct{}{}
		l.mu.Unlock()
		return cc, nil
	}
}

// connState is the http.Server ConnState hook: it keeps the list of idle keep-alive connections.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	cc, ok := c.(*countedConn)
	if !ok {
		return // not one of Accept's (the hook of a server that serves another listener)
	}
	cc.unused.Store(s == http.StateNew)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idle.remove(cc)
	if s == http.StateIdle && !cc.closed {
		l.idle.pushBack(cc)
	}
	if s == http.StateHijacked || s == http.StateClosed {
		delete(l.plain, c)
	}
}

// closeUnused closes the connections on which no request has started yet. At shutdown http.Server would wait up
// to 5 seconds for each of them (it counts them as idle only then); no request of theirs is lost that a client
// would not have lost anyway.
func (l *connLimit) closeUnused() {
	l.mu.Lock()
	var unused []net.Conn
	for c := range l.plain {
		if cc, ok := c.(*countedConn); ok && cc.unused.Load() {
			unused = append(unused, c)
		}
	}
	l.mu.Unlock()
	for _, c := range unused {
		c.Close()
	}
}

// interruptUploads makes the reads of requests whose body is still arriving (slow uploads) fail now: at
// shutdown they end at once instead of holding the shutdown for their whole READ_TIMEOUT. Requests that have
// been read are left to finish.
func (l *connLimit) interruptUploads() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.plain {
		if cc, ok := c.(*countedConn); ok && cc.uploading.Load() {
			_ = c.SetReadDeadline(time.Now())
		}
	}
}

type countedConnKey struct{}

// connContext is the http.Server ConnContext hook: requests carry their connection (see uploading).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok {
		return context.WithValue(ctx, countedConnKey{}, cc)
	}
	return ctx
}

// requestConn is the connection r came on (nil: not one of the server's listener's), for the event streams
// (gqlstream.Config.NetConn).
func requestConn(r *http.Request) net.Conn {
	if cc, ok := r.Context().Value(countedConnKey{}).(*countedConn); ok {
		return cc.Conn
	}
	return nil
}

// markUpload records, until done is called, that the request of ctx is reading its body.
func markUpload(ctx context.Context) (done func()) {
	cc, ok := ctx.Value(countedConnKey{}).(*countedConn)
	if !ok {
		return func() {}
	}
	cc.uploading.Store(true)
	return func() { cc.uploading.Store(false) }
}

// countedConn gives its slot back when closed (hijacked websocket connections too).
type countedConn struct {
	net.Conn
	l         *connLimit
	once      sync.Once
	uploading atomic.Bool // its current request is reading the body (limitBody)
	unused    atomic.Bool // accepted, and no request has started on it yet (http.StateNew)

	// Under l.mu: its place in l.idle, and whether Close has given its slot back (it never enters l.idle again).
	inIdle     bool
	prev, next *countedConn
	closed     bool
}

// SyscallConn gives the connection's socket (syscall.Conn), which the embedded interface hides: the websocket's
// stream writes use it (gqlstream: wsConn.writeNow).
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.closed = true
		c.l.idle.remove(c)
		delete(c.l.plain, c)
		c.l.mu.Unlock()
	})
	return err
}
