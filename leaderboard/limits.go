package leaderboard

import (
	"context"
	"time"
)

// gate bounds how many calls of one kind (reads or writes) a Store has in flight on Redis. A call waits for a
// slot at most wait (and never past its context); then it is RateLimited. Waiters are served in arrival order
// (a channel's waiting senders are queued). A nil gate lets everything through.
type gate struct {
	slots chan struct{}
	wait  time.Duration
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
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.free, nil
	case <-t.C:
		return nil, errOverloaded
	case <-ctx.Done():
		return nil, redisError(ctx.Err())
	}
}

func (g *gate) release() { <-g.slots }
