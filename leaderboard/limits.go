package leaderboard

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// gate bounds how many calls of one kind (reads or writes) a Store has in flight on Redis. A call waits for a
// slot at most wait (and never past its context); then it is RateLimited, or Unavailable when no call in flight
// ended during the whole wait (Redis is not answering: the slots are held by calls stuck on it, not by load).
// Waiters are served in arrival order (a channel's waiting senders are queued). A nil gate lets everything through.
type gate struct {
	slots chan struct{}
	wait  time.Duration
	// ended counts the calls that gave their slot back, so that a waiter that got none can tell a stalled
	// Redis (none ended while it waited) from a busy server.
	ended atomic.Uint64
	// free is release as a func value, made once: every acquire hands it out, and a method value made there
	// would be an allocation per call.
	free func()
}

func newGate(n int, wait time.Duration) *gate {
	if n <= 0 {
		return nil
	}
	g := &gate{slots: make(chan struct{}, n), wait: wait}
	g.free = g.release
	return g
}

var errOverloaded = &Error{Code: RateLimited, Message: "the server is busy; retry in a moment"}

// errStalled: every slot is held by a call that Redis has not answered for a whole wait. The waiting call was
// not sent (errNotSent: its outcome is known).
var errStalled = &Error{Code: Unavailable, Message: "the data store is not answering; retry in a moment", Err: errNotSent}

// errNotSent marks an Unavailable error of a call that never reached Redis (see OutcomeUnknown).
var errNotSent = errors.New("no call in flight to the data store ended while this one waited for a slot")

// acquire takes a slot; release it with the returned function.
func (g *gate) acquire(ctx context.Context) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	select {
	case g.slots <- struct{}{}:
		return g.free, nil
	default:
	}
	ended := g.ended.Load()
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.free, nil
	case <-t.C:
		if g.ended.Load() == ended {
			return nil, errStalled
		}
		return nil, errOverloaded
	case <-ctx.Done():
		return nil, redisError(ctx.Err())
	}
}

func (g *gate) release() {
	<-g.slots
	g.ended.Add(1)
}
