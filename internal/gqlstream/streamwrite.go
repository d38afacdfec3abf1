package gqlstream

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaderboard/leaderboard/graph"
)

// A subscription whose first response is out is written by its connection (graph.StreamHolder): the hub wakes
// the stream, and the connection joins the queue of the stream writers, which write what its streams have waiting
// in one write, as far as the peer takes it at once; a slow peer's writes go on in a goroutine of its own.

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
		count: c.owner.metrics.Operations.WithLabelValues("subscription", s.Field(), "ok")}
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

// SlowFor is how long a connection whose peer did not take a stream writer's write (writeNow) keeps writing from
// goroutines of its own instead of the stream writers: each slow write would cost a writer a hand-off again.
const SlowFor = 10 * time.Second

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
			c.slowUntil = time.Now().Add(SlowFor) // before writeRest can end the turn
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
// connection's own (the server exports both as metrics).
var streamedFrames, slowHandoffs atomic.Int64

// StreamedFrames is the number of subscription responses that connections have written themselves, in this
// process.
func StreamedFrames() int64 { return streamedFrames.Load() }

// SlowHandoffs is the number of stream writes that a peer did not take at once and a goroutine of its connection
// finished, in this process.
func SlowHandoffs() int64 { return slowHandoffs.Load() }

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
// arrive, where writers on every processor left them to the writers' pauses. The fan-out pays for it with fewer
// messages a second (BENCHMARKS.md, "stream writers leave a processor to the requests").
func streamWriterCount(procs int) int { return max(1, procs-1) }

// writerYieldEvery is how many connections a stream writer serves before it lets other goroutines run.
const writerYieldEvery = 16

// A stream writer pauses for writerPause after every writerPauseEvery connections (~4 ms of writes). Yielding is
// not enough for the requests: Go's scheduler looks for goroutines whose sockets are ready (the netpoller) only
// when its run queues are empty, or from its monitor thread at most every 10 ms, and writers that yield go back
// on the run queue. With both writers busy, a submission's request and its Redis reply each waited up to 10 ms to
// be noticed. A pausing writer leaves the queue empty for a moment, and the processor polls the network
// (BENCHMARKS.md, "stream writers that pause"). Since writers leave a processor free (streamWriterCount) the
// pauses matter less; they stay for the processors the requests share with the writers.
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
