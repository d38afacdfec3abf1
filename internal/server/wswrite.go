package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
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

// streamOp is a subscription whose responses after the first the connection writes itself (graph.StreamHolder).
type streamOp struct {
	s        *graph.LiveStream
	state    *wsOp  // graphql-transport-ws: the operation's protocol state (transportState.streamSend)
	peerJSON []byte // the id the peer knows it by, JSON-encoded
	typJSON  []byte // the data message type (next, or data on graphql-ws), JSON-encoded
	queued   bool   // in c.ready (guarded by c.readyMu)
	count    prometheus.Counter
}

// bind takes over a stream whose first response, with gqlgen's id and type, has just been written to the peer
// as peerID.
func (c *wsConn) bind(s *graph.LiveStream, id, peerID, typ string) {
	op := &streamOp{s: s, peerJSON: appendJSONString(nil, peerID), typJSON: appendJSONString(nil, typ),
		count: c.owner.metrics.operations.WithLabelValues("subscription", s.Field(), "ok")}
	if c.tws != nil {
		if op.state = c.tws.op(id); op.state == nil {
			return // ended already
		}
	}
	c.boundMu.Lock()
	if c.bound == nil {
		c.bound = map[string]*graph.LiveStream{}
	}
	c.bound[id] = s
	c.boundMu.Unlock()
	s.Bind(func() { c.wake(op) }, func() { c.wl.lock(); c.wl.unlock() })
}

// takeBound returns the stream of gqlgen's operation id that the connection has taken over since the last call
// (nil: none), for the transport (wsTransport) to let the operation's goroutine go.
func (c *wsConn) takeBound(id string) *graph.LiveStream {
	c.boundMu.Lock()
	defer c.boundMu.Unlock()
	s := c.bound[id]
	delete(c.bound, id)
	if len(c.bound) == 0 {
		c.bound = nil // an emptied map keeps its memory (~0.3 KiB), for the connection's life
	}
	return s
}

// wake schedules op's waiting responses to be written. It is called by the hub with a board's lock held: it
// never waits for a write. The connection joins the queue of the server's stream writers (streamWriters) unless
// it is in it already or its writes have a goroutine of their own (a slow peer).
func (c *wsConn) wake(op *streamOp) {
	c.readyMu.Lock()
	if !op.queued {
		op.queued = true
		c.ready = append(c.ready, op)
	}
	start := !c.flushing
	c.flushing = true
	slow := start && time.Now().Before(c.slowUntil)
	c.readyMu.Unlock()
	switch {
	case slow:
		go c.writeOwn()
	case start:
		c.owner.writers.add(c)
	}
}

// slowFor is how long a connection whose peer did not take a stream writer's write (writeNow) keeps writing from
// goroutines of its own instead of the stream writers: each slow write would cost a writer a hand-off again.
const slowFor = 10 * time.Second

// takeReady takes the woken streams; with none left it ends the connection's turn (flushing false).
func (c *wsConn) takeReady() []*streamOp {
	c.readyMu.Lock()
	defer c.readyMu.Unlock()
	ops := append(c.turn[:0], c.ready...)
	clear(c.ready)
	c.ready = c.ready[:0]
	for _, op := range ops {
		op.queued = false
	}
	if len(ops) == 0 {
		c.flushing = false
	}
	c.turn = ops
	return ops
}

// writeTurn is one turn of the connection in a stream writer: it writes what its streams have waiting as far as
// the socket takes it at once (writeNow); a peer that does not take all the bytes gets a goroutine of its own
// that finishes the write (writeRest). With more woken meanwhile, the connection goes to the back of the queue.
func (c *wsConn) writeTurn() {
	ops := c.takeReady()
	if len(ops) == 0 {
		return
	}
	if c.writeStreams(ops, true) {
		return
	}
	clear(ops)
	c.readyMu.Lock()
	more := len(c.ready) > 0
	if !more {
		c.flushing = false
	}
	c.readyMu.Unlock()
	if more {
		c.owner.writers.add(c)
	}
}

// writeRest finishes, in a goroutine of its own, a write that the peer did not take at once (writeNow): the
// rest of it within the write timeout (the write lock, taken by writeStreams, is handed over with it), then every
// stream woken until none is left.
func (c *wsConn) writeRest(bp *[]byte, rest []byte, ended []*streamOp) {
	_ = c.flushLocked(rest, time.Time{})
	c.wl.unlock()
	putFrameBuf(bp)
	for _, op := range ended {
		op.s.Finish()
	}
	c.writeOwn()
}

// writeOwn writes every stream woken until none is left, each write within the write timeout (a slow peer's
// writes, in a goroutine of their own).
func (c *wsConn) writeOwn() {
	for {
		ops := c.takeReady()
		if len(ops) == 0 {
			return
		}
		c.writeStreams(ops, false)
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
//
// With slice, the write goes in only as far as the socket takes it at once (writeNow); when the peer has not
// taken it all, writeRest finishes it in a goroutine of its own (handedOff true, the connection's turn goes on
// there).
func (c *wsConn) writeStreams(ops []*streamOp, slice bool) (handedOff bool) {
	var ended []*streamOp
	c.wl.lock()
	bp, mp := getFrameBuf(), getFrameBuf()
	buf := *bp
	for _, op := range ops {
		for !op.s.Stopped() {
			data, got, end := op.s.AppendNext((*mp)[:0])
			*mp = data
			if end {
				ended = append(ended, op)
				break
			}
			if !got {
				break
			}
			if c.tws != nil && !c.tws.streamSend(op.state) {
				continue
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
			streamedFrames.Add(1)
		}
	}
	*bp = buf
	putFrameBuf(mp)
	if len(buf) > 0 && !c.closeSent.Load() {
		if !slice {
			_ = c.flushLocked(buf, time.Time{})
		} else if n, err := c.writeNow(buf); err == errWouldBlock {
			slowHandoffs.Add(1)
			c.readyMu.Lock()
			c.slowUntil = time.Now().Add(slowFor) // before writeRest can end the turn
			c.readyMu.Unlock()
			go c.writeRest(bp, buf[n:], ended) // bp goes back to the pool there
			return true
		} else if err != nil {
			c.Close()
		}
	}
	c.wl.unlock()
	putFrameBuf(bp)
	for _, op := range ended {
		op.s.Finish()
	}
	return false
}

// streamedFrames counts the stream responses written, slowHandoffs the writes handed to a goroutine of the
// connection's own (tests check that those paths ran).
var streamedFrames, slowHandoffs atomic.Int64

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

// streamWriters are the few goroutines (streamWriterCount, started when there is work, ending when there is
// none) that write the connections' stream responses. A fan-out to 10,000 connections woke 10,000 goroutines at
// once, and every request's next step queued behind them; a writer lets other goroutines run after every
// writerYieldEvery connections, and pauses after every writerPauseEvery.
type streamWriters struct {
	mu      sync.Mutex
	queue   []*wsConn // queue[head:] wait for a turn, oldest first
	head    int
	running int
	max     int // writers at most: streamWriterCount(GOMAXPROCS) when first used
}

// streamWriterCount is how many stream writers run at most with procs processors: one fewer than the processors
// (at least one), so that a processor is always left for the requests. Writes first: a processor with nothing
// else to run waits in the netpoller and takes a submission's request and its Redis reply the moment they
// arrive, where writers on every processor left them to the writers' pauses. lbbench fanout, 10,000 subscribers,
// two processors, alternating with a writer per processor (two runs of three rounds): one board's submit p99 21.3
// and 22.4 ms against 38.6 and 34.0, 100 boards' 54.4 and 44.7 against 151.0 and 299.9, the cluster's 57.5 and
// 81.7 ms against 107-212 in the session's earlier runs; the price is the fan-out's own: 30 % fewer messages a
// second, one board's p99 391 and 411 ms against 344 and 340.
func streamWriterCount(procs int) int { return max(1, procs-1) }

// writerYieldEvery is how many connections a stream writer serves before it lets other goroutines run.
const writerYieldEvery = 16

// A stream writer pauses for writerPause after every writerPauseEvery connections (~4 ms of writes). Yielding is
// not enough for the requests: Go's scheduler looks for goroutines whose sockets are ready (the netpoller) only
// when its run queues are empty, or from its monitor thread at most every 10 ms, and writers that yield go back
// on the run queue. With both writers busy, a submission's request and its Redis reply each waited up to 10 ms to
// be noticed. A pausing writer leaves the queue empty for a moment, and the processor polls the network.
// lbbench fanout, 10,000 subscribers: one board's submit p99 45.5 and 58.9 ms against 73.7 and 81.4 without (with
// a writer per processor; since writers leave a processor free, streamWriterCount, the pauses matter less: one
// writer without them measured within the noise, and they stay for the processors the requests share with it).
const (
	writerPauseEvery = 256
	writerPause      = 50 * time.Microsecond
)

func (p *streamWriters) add(c *wsConn) {
	p.mu.Lock()
	if p.head > 1024 && p.head > len(p.queue)/2 {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, c)
	if p.max == 0 {
		p.max = streamWriterCount(runtime.GOMAXPROCS(0)) // read once: it takes the scheduler's lock, and add runs per woken connection
	}
	start := p.running < p.max
	if start {
		p.running++
	}
	p.mu.Unlock()
	if start {
		go p.work()
	}
}

func (p *streamWriters) work() {
	for n := 1; ; n++ {
		p.mu.Lock()
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
			p.running--
			p.mu.Unlock()
			return
		}
		c := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		p.mu.Unlock()
		c.writeTurn()
		switch {
		case n%writerPauseEvery == 0:
			time.Sleep(writerPause)
		case n%writerYieldEvery == 0:
			runtime.Gosched()
		}
	}
}
