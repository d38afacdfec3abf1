package gqlstream

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Every frame to the peer is written here, as bytes on the connection (gorilla only reads): one write may carry
// the frames of several subscriptions (a connection's streams, pulled together), and a frame is built in one
// buffer without gorilla's per-connection write buffer. Each frame batch goes out in one Write call, so the
// control frames gorilla itself still writes on read errors (a 1009 close) never interleave with ours.

// Frame opcodes (RFC 6455 section 5.2).
const (
	opText  = 1
	opClose = 8
	opPing  = 9
	opPong  = 10
)

// maxKeptWriteBuf: a write buffer that grew beyond this (a large response) is not kept for the next write.
const maxKeptWriteBuf = 64 << 10

// appendFrameHeader appends the header of one final, unmasked server frame of n payload bytes.
func appendFrameHeader(dst []byte, opcode byte, n int) []byte {
	dst = append(dst, 0x80|opcode)
	switch {
	case n < 126:
		return append(dst, byte(n))
	case n <= 0xFFFF:
		return append(dst, 126, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 127), uint64(n))
	}
}

// unusedWriteBuffers is gorilla's write buffer pool: it would take a buffer only to write a frame itself, which
// it does for the close frame after a read error (rare).
var unusedWriteBuffers = &sync.Pool{}

// onPeerPing answers a ping from the peer (gorilla's default handler would write with its own writer).
func (c *wsConn) onPeerPing(data string) error {
	_ = c.send(opPong, []byte(data))
	return nil
}

// writeLock is the connection's one writer: a channel, so that a close frame can give up waiting at its
// deadline behind a write to a peer that does not read.
type writeLock chan struct{}

func (l writeLock) lock()   { l <- struct{}{} }
func (l writeLock) unlock() { <-l }

func (l writeLock) lockBy(deadline time.Time) bool {
	select {
	case l <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case l <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// send writes one frame within the write timeout (a failed write closes the connection), unless a close frame
// has gone already.
func (c *wsConn) send(opcode byte, payload []byte) error {
	c.wl.lock()
	defer c.wl.unlock()
	if c.closeSent.Load() {
		return errWSClosing
	}
	bp := getFrameBuf()
	defer putFrameBuf(bp)
	*bp = append(appendFrameHeader((*bp)[:0], opcode, len(payload)), payload...)
	return c.flushLocked(*bp, time.Time{})
}

// frameBufs are the buffers frames are built in, shared by the connections: an idle connection holds none.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getFrameBuf() *[]byte { return frameBufs.Get().(*[]byte) }

// putFrameBuf gives a buffer back, unless it grew beyond maxKeptWriteBuf (a large response).
func putFrameBuf(bp *[]byte) {
	if cap(*bp) <= maxKeptWriteBuf {
		*bp = (*bp)[:0]
		frameBufs.Put(bp)
	}
}

// flushLocked writes b by deadline (zero: the write timeout). The lock is held. A failed write closes the
// connection: a peer that stopped reading must not keep it.
func (c *wsConn) flushLocked(b []byte, deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(c.writeTimeout)
	}
	_, err := c.writeBy(b, deadline)
	if err != nil {
		c.Close()
	}
	return err
}

// writeBy writes b by deadline. The lock is held.
func (c *wsConn) writeBy(b []byte, deadline time.Time) (int, error) {
	conn := c.ws.NetConn()
	_ = conn.SetWriteDeadline(deadline)
	return conn.Write(b)
}

// errWouldBlock: the socket's send buffer filled before all of a write went in (writeNow).
var errWouldBlock = errors.New("websocket: the peer's socket buffer is full")

// writeNow writes as much of b as the socket's send buffer takes at once, without waiting for the peer, and says
// errWouldBlock when that was not all of it. The lock is held. It sets no deadline: a deadline per stream write
// (the peer's slice of a stream writer's time) cost a fan-out ~7 % of the server's CPU in timer work, each
// write arming a timer that fired after the write was long done. Without raw access to the socket it gives the
// write streamWriteSlice instead.
func (c *wsConn) writeNow(b []byte) (n int, err error) {
	raw := c.rawConn()
	if raw == nil {
		n, err = c.writeBy(b, time.Now().Add(streamWriteSlice))
		if isTimeout(err) {
			err = errWouldBlock
		}
		return n, err
	}
	try := func() error {
		return raw.Write(func(fd uintptr) bool {
			for n < len(b) {
				m, e := syscall.Write(int(fd), b[n:])
				if m > 0 {
					n += m
				}
				switch {
				case e == syscall.EINTR:
				case e == syscall.EAGAIN:
					err = errWouldBlock
					return true
				case e != nil:
					err = e
					return true
				case m <= 0:
					err = io.ErrShortWrite
					return true
				}
			}
			return true // done: never wait for the socket here
		})
	}
	rerr := try()
	if isTimeout(rerr) && n == 0 {
		// A deadline left by an earlier write (the connection's own writes, gorilla's control frames) has
		// passed, and the socket refuses writes until it is cleared.
		_ = c.ws.NetConn().SetWriteDeadline(time.Time{})
		rerr = try()
	}
	if err == nil {
		err = rerr
	}
	return n, err
}

// rawConn returns the connection's socket for writeNow (nil: none, as behind TLS), looked up once.
func (c *wsConn) rawConn() syscall.RawConn {
	if !c.rawLooked {
		c.rawLooked = true
		if sc, ok := c.ws.NetConn().(syscall.Conn); ok {
			c.raw, _ = sc.SyscallConn()
		}
	}
	return c.raw
}

// streamWriteSlice is how long a stream writer waits for one peer to take a write before a goroutine of the
// connection's own takes it over, on a connection without raw access to its socket (writeNow waits for none): a
// peer that reads slowly must not hold up the others.
const streamWriteSlice = 5 * time.Millisecond

func isTimeout(err error) bool {
	if err == nil {
		return false // before ne: errors.As makes it escape, an allocation per stream write
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// WriteClose sends a close frame, the first time only: the peer gets one close frame, with the first code.
func (c *wsConn) WriteClose(code int, message string) error {
	return c.writeClose(code, message, time.Now().Add(time.Second))
}

// CloseReason is what a close frame carries of reason: a close frame's reason is at most 123 bytes, and must be
// valid UTF-8, so a longer one is cut on a character boundary.
func CloseReason(reason string) string { return truncateString(reason, 123) }

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
	message = CloseReason(message)
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
