package server

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaderboard/leaderboard/graph"
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
	c.wbuf = append(appendFrameHeader(c.wbuf[:0], opcode, len(payload)), payload...)
	return c.flushLocked(time.Time{})
}

// flushLocked writes c.wbuf by deadline (zero: the write timeout). The lock is held. A failed write closes the
// connection: a peer that stopped reading must not keep it.
func (c *wsConn) flushLocked(deadline time.Time) error {
	conn := c.ws.NetConn()
	if deadline.IsZero() {
		// The deadline is moved only when less than half the write timeout is left: a write may block between
		// half the timeout and all of it, and most writes set no deadline.
		if now := time.Now(); c.writeBy.Sub(now) < c.writeTimeout/2 {
			c.writeBy = now.Add(c.writeTimeout)
			_ = conn.SetWriteDeadline(c.writeBy)
		}
	} else {
		c.writeBy = deadline
		_ = conn.SetWriteDeadline(deadline)
	}
	_, err := conn.Write(c.wbuf)
	if cap(c.wbuf) > maxKeptWriteBuf {
		c.wbuf = nil
	}
	if err != nil {
		c.Close()
	}
	return err
}

// streamOp is a subscription whose responses after the first the connection writes itself (graph.StreamHolder).
type streamOp struct {
	s        *graph.LiveStream
	id       string // gqlgen's id of the operation
	peerJSON []byte // the id the peer knows it by, JSON-encoded
	typ      string // the data message type: next, or data on graphql-ws
	typJSON  []byte // typ, JSON-encoded
	queued   bool   // in c.ready (guarded by c.readyMu)
	count    prometheus.Counter
}

// bind takes over a stream whose first response, with gqlgen's id and type, has just been written to the peer
// as peerID.
func (c *wsConn) bind(s *graph.LiveStream, id, peerID, typ string) {
	op := &streamOp{s: s, id: id, peerJSON: appendJSONString(nil, peerID), typ: typ, typJSON: appendJSONString(nil, typ),
		count: c.owner.metrics.operations.WithLabelValues("subscription", s.Field(), "ok")}
	s.Bind(func() { c.wake(op) }, func() { c.wl.lock(); c.wl.unlock() })
}

// wake schedules op's waiting responses to be written. It is called by the hub with a board's lock held: it
// never waits for a write, and the writing goroutine runs only while there is something to write (an idle
// connection holds none).
func (c *wsConn) wake(op *streamOp) {
	c.readyMu.Lock()
	if !op.queued {
		op.queued = true
		c.ready = append(c.ready, op)
	}
	start := !c.flushing
	c.flushing = true
	c.readyMu.Unlock()
	if start {
		go c.writeReady()
	}
}

// writeReady writes the responses of the streams woken until none is left.
func (c *wsConn) writeReady() {
	var ops []*streamOp
	for {
		c.readyMu.Lock()
		ops = append(ops[:0], c.ready...)
		clear(c.ready)
		c.ready = c.ready[:0]
		for _, op := range ops {
			op.queued = false
		}
		if len(ops) == 0 {
			c.flushing = false
		}
		c.readyMu.Unlock()
		if len(ops) == 0 {
			return
		}
		c.writeStreams(ops)
		clear(ops)
	}
}

// dataPrefix etc. make gqlgen's data message, as encoding/json writes it for a response with data only:
// {"payload":{"data":...},"id":...,"type":...}.
var (
	dataPrefix = []byte(`{"payload":{"data":`)
	dataID     = []byte(`},"id":`)
	dataType   = []byte(`,"type":`)
)

// writeStreams writes what the streams have waiting, in one write, and finishes the ones that ended once what
// they had before their end is written. Under the write lock, so that a stream whose subscription has stopped
// (its context ended, graph.LiveStream.Stopped) is written no more once its sync has returned.
func (c *wsConn) writeStreams(ops []*streamOp) {
	var ended []*streamOp
	c.wl.lock()
	buf := c.wbuf[:0]
	for _, op := range ops {
		for !op.s.Stopped() {
			data, got, end := op.s.AppendNext(c.mbuf[:0])
			c.mbuf = data
			if end {
				ended = append(ended, op)
				break
			}
			if !got {
				break
			}
			if c.tws != nil {
				if _, send := c.tws.outbound(op.typ, op.id); !send {
					continue
				}
			}
			n := len(dataPrefix) + len(data) + len(dataID) + len(op.peerJSON) + len(dataType) + len(op.typJSON) + 1
			buf = appendFrameHeader(buf, opText, n)
			buf = append(buf, dataPrefix...)
			buf = append(buf, data...)
			buf = append(buf, dataID...)
			buf = append(buf, op.peerJSON...)
			buf = append(buf, dataType...)
			buf = append(buf, op.typJSON...)
			buf = append(buf, '}')
			op.count.Inc()
		}
	}
	c.wbuf = buf
	if cap(c.mbuf) > maxKeptWriteBuf {
		c.mbuf = nil
	}
	if len(buf) > 0 && !c.closeSent.Load() {
		_ = c.flushLocked(time.Time{})
	}
	c.wl.unlock()
	for _, op := range ended {
		op.s.Finish()
	}
}
