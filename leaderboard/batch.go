package leaderboard

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls of concurrent requests to Redis together: each of its lanes takes a call, adds
// whatever other calls are already waiting (up to maxBatch), and runs them as one pipeline. Under load Redis
// then reads and answers many calls per system call; a lone call goes out at once, so light load waits for
// nothing. Calls of a script that applies a list of items one by one (submit) on the same board with the same
// header are merged into one call of their items, up to maxMergedItems: Redis's cost of a script call is mostly
// the call, not the item (a single submission costs it about twice an item of a batch of 100). Each item is
// still applied atomically on its own, as in a call of its own; the merged call's replies are handed back to
// their callers.
type batcher struct {
	fns      *functions
	queue    chan *scriptCall
	maxBatch int
	timeout  time.Duration
	// pending counts the calls queued or in a lane's hands, until the lane is done with them: a caller that
	// gave up (its context ended) leaves its call running, and Drain waits for it before Redis is closed.
	pending atomic.Int64
}

type scriptCall struct {
	script *script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
	// deadline is the caller's context's (zero: none). The lane holds the call to it (see run).
	deadline time.Time
	// answered: cmd is set and done closed, by the round trip or, at the deadline, by the pipeline's timer.
	answered atomic.Bool
}

// answer hands cmd to the caller, unless the call was answered already (its deadline passed first).
func (c *scriptCall) answer(cmd *redis.Cmd) {
	if c.answered.CompareAndSwap(false, true) {
		c.cmd = cmd
		close(c.done)
	}
}

// maxBatch bounds the calls of one pipeline; batchTimeout bounds one pipeline's round trip, and so does the
// latest deadline of its calls (go-redis's read and write timeouts apply within it).
const (
	maxBatch     = 64
	batchTimeout = 10 * time.Second
)

// maxMergedItems bounds the items of a merged call, so that one script call does not hold Redis for long.
const maxMergedItems = 128

func newBatcher(fns *functions, lanes int) *batcher {
	b := &batcher{fns: fns, queue: make(chan *scriptCall, lanes*maxBatch), maxBatch: maxBatch, timeout: batchTimeout}
	for range lanes {
		go b.lane()
	}
	return b
}

// run runs a script call through a lane and returns its result. A caller whose context has a deadline (every
// HTTP request has REQUEST_TIMEOUT's) is held to it by the lane, not by waiting on ctx.Done, which would start
// the request's timer (the server's requestContext starts one only when asked; starting and stopping it were
// 2.3% of the server's CPU for a rank read, the start 1.2% for a submission): a call whose deadline passed
// before a lane took it is answered DeadlineExceeded and not sent, and a call whose deadline passes during its
// pipeline's round trip is answered DeadlineExceeded then (its outcome unknown) while the round trip goes on for
// the calls with later deadlines: a call fails by its own deadline only, never by another's. Such a caller is not
// abandoned when its context is canceled before the deadline (a client that went away): its call is in flight
// or about to be, and ends by the deadline. One bound is looser than ctx.Done's: a call that waits in the queue
// while every lane waits on a stalled Redis for calls with later deadlines (or none) is answered when a lane
// is free, at most go-redis's socket timeout after its deadline. A caller without a deadline gets ctx's error
// at once when ctx ends first; its call may still run (its outcome is unknown, as for any call cut off in
// flight).
func (b *batcher) run(ctx context.Context, script *script, keys []string, args ...any) *redis.Cmd {
	deadline, timed := ctx.Deadline()
	if timed && !time.Now().Before(deadline) {
		return failedCmd(ctx, context.DeadlineExceeded)
	}
	if !timed {
		if err := ctx.Err(); err != nil {
			return failedCmd(ctx, err)
		}
	}
	c := &scriptCall{script: script, keys: keys, args: args, done: make(chan struct{}), deadline: deadline}
	b.pending.Add(1)
	select {
	case b.queue <- c:
	default: // every lane is busy and the queue full: wait for room
		select {
		case b.queue <- c:
		case <-ctx.Done():
			b.pending.Add(-1)
			return failedCmd(ctx, ctx.Err())
		}
	}
	if timed {
		<-c.done
		return c.cmd
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		return failedCmd(ctx, ctx.Err())
	}
}

func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

func (b *batcher) lane() {
	batch := make([]*scriptCall, 0, b.maxBatch)
	var m merger
	cmds := make([]*redis.Cmd, 0, b.maxBatch)
	for c := range b.queue {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < b.maxBatch {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		// The round trip lasts until the latest deadline of the calls sent (batchTimeout at most); a call already
		// past its deadline is answered without being sent, and one whose deadline comes before the round trip
		// ends is answered at it by the pipeline's timer.
		now := time.Now()
		limit := now.Add(b.timeout)
		var until, earliest time.Time
		untimed := false
		live := batch[:0]
		for _, c := range batch {
			switch {
			case c.deadline.IsZero():
				untimed = true
			case !now.Before(c.deadline):
				c.answer(failedCmd(context.Background(), context.DeadlineExceeded))
				continue
			default:
				if c.deadline.After(until) {
					until = c.deadline
				}
				if earliest.IsZero() || c.deadline.Before(earliest) {
					earliest = c.deadline
				}
			}
			live = append(live, c)
		}
		if len(live) == 0 {
			b.pending.Add(-int64(len(batch)))
			continue
		}
		if untimed || until.After(limit) {
			until = limit
		}
		var timer *deadlineTimer
		if !earliest.IsZero() && earliest.Before(until) {
			timer = startDeadlineTimer(live, earliest, until)
		}
		sends := m.merge(live)
		ctx, cancel := context.WithDeadline(context.Background(), until)
		if len(sends) == 1 {
			s := sends[0]
			s.finish(b.fns.run(ctx, s.call.script, s.call.keys, s.call.args...))
		} else {
			pipe := b.fns.rdb.Pipeline()
			cmds = cmds[:0]
			for _, s := range sends {
				cmds = append(cmds, b.fns.queue(ctx, pipe, s.call.script, s.call.keys, s.call.args...))
			}
			_, _ = pipe.Exec(ctx)
			for i, s := range sends {
				cmd := cmds[i]
				if ScriptMissing(cmd.Err()) {
					cmd = b.fns.run(ctx, s.call.script, s.call.keys, s.call.args...) // the first use after a Redis restart
				}
				s.finish(cmd)
			}
		}
		cancel()
		timer.stop()
		b.pending.Add(-int64(len(batch)))
	}
}

// drain waits until every call handed to the batcher is done (answered, or ended by its round trip's deadline),
// or ctx ends.
func (b *batcher) drain(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for b.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deadlineTimer answers the calls of a pipeline in flight whose deadlines pass before its round trip ends
// (DeadlineExceeded: sent, outcome unknown), one timer for the whole pipeline, set only when their deadlines
// differ, so a lone call or a batch of equal deadlines starts none.
type deadlineTimer struct {
	mu    sync.Mutex
	calls []*scriptCall // the lane's batch, reused only after stop, after which fire never reads it
	until time.Time     // the round trip's end: calls due later are answered by it
	t     *time.Timer
	over  bool // the round trip ended
}

func startDeadlineTimer(calls []*scriptCall, first, until time.Time) *deadlineTimer {
	d := &deadlineTimer{calls: calls, until: until}
	d.mu.Lock()
	d.t = time.AfterFunc(time.Until(first), d.fire)
	d.mu.Unlock()
	return d
}

// fire answers the calls past their deadline and waits for the next deadline due before the round trip ends.
func (d *deadlineTimer) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.over {
		return
	}
	now := time.Now()
	var next time.Time
	for _, c := range d.calls {
		if c.deadline.IsZero() || c.answered.Load() {
			continue
		}
		if !now.Before(c.deadline) {
			c.answer(failedCmd(context.Background(), context.DeadlineExceeded))
		} else if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	if !next.IsZero() && next.Before(d.until) {
		d.t.Reset(next.Sub(now))
	}
}

// stop ends the timer once the round trip is over (every call answered); nil is a no-op.
func (d *deadlineTimer) stop() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.over = true
	d.t.Stop()
	d.mu.Unlock()
}

// send is a script call to make: one of the batch's calls, or a merged call that carries the items of several
// (parts, with their item counts).
type send struct {
	call  *scriptCall
	parts []*scriptCall
	sizes []int
	items int
}

// finish hands the result of a send to its callers: a merged call's reply is split by their item counts; an
// error goes to all of them.
func (s *send) finish(cmd *redis.Cmd) {
	if s.parts == nil {
		s.call.answer(cmd)
		return
	}
	reply, err := cmd.Slice()
	if err == nil && len(reply) != s.items {
		err = fmt.Errorf("%s script returned %d replies for %d items", s.call.script.role, len(reply), s.items)
	}
	off := 0
	for i, c := range s.parts {
		part := redis.NewCmd(context.Background())
		if err != nil {
			part.SetErr(err)
		} else {
			part.SetVal(reply[off : off+s.sizes[i]])
		}
		off += s.sizes[i]
		c.answer(part)
	}
}

// merger groups the calls of a batch that may run as one (see batcher); its buffers are reused between batches.
type merger struct {
	sends  []send
	groups map[string]int // merge key -> index in sends
	key    []byte
}

// merge returns what to send for batch: its calls in order, with the calls that share a script with items, a
// key and a header merged into the first of them (up to maxMergedItems items each).
func (m *merger) merge(batch []*scriptCall) []send {
	m.sends = m.sends[:0]
	clear(m.groups)
	for _, c := range batch {
		it := c.script.items
		n, ok := 0, false
		if it != nil && len(c.keys) == 1 && len(c.args) >= it.header {
			n, ok = c.args[it.count].(int)
		}
		if !ok || len(batch) == 1 {
			m.sends = append(m.sends, send{call: c, items: n})
			continue
		}
		m.key = mergeKey(m.key[:0], c, it)
		if i, found := m.groups[string(m.key)]; found && m.sends[i].items+n <= maxMergedItems {
			s := &m.sends[i]
			if s.parts == nil {
				first := s.call
				s.parts, s.sizes = []*scriptCall{first}, []int{s.items}
				args := make([]any, 0, len(first.args)+len(c.args)-it.header)
				s.call = &scriptCall{script: first.script, keys: first.keys, args: append(args, first.args...)}
			}
			s.call.args = append(s.call.args, c.args[it.header:]...)
			s.items += n
			s.call.args[it.count] = s.items
			s.parts = append(s.parts, c)
			s.sizes = append(s.sizes, n)
			continue
		}
		if m.groups == nil {
			m.groups = map[string]int{}
		}
		m.groups[string(m.key)] = len(m.sends)
		m.sends = append(m.sends, send{call: c, items: n})
	}
	return m.sends
}

// mergeKey appends what calls must share to be merged: the script, the key and the header but for its item count.
func mergeKey(b []byte, c *scriptCall, it *itemArgs) []byte {
	b = append(b, c.script.role...)
	b = append(b, 0)
	b = append(b, c.keys[0]...)
	for i, a := range c.args[:it.header] {
		if i == it.count {
			continue
		}
		b = append(b, 0)
		switch v := a.(type) {
		case string:
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, ':')
			b = append(b, v...)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		default:
			b = fmt.Append(b, v)
		}
	}
	return b
}
