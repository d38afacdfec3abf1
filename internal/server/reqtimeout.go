package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/internal/gqlstream"
)

// withTimeout bounds HTTP GraphQL requests by REQUEST_TIMEOUT (not websockets and event streams, which live long).
func (a *App) withTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" && !gqlstream.IsEventStream(r) && a.cfg.RequestTimeout > 0 {
			ctx := newRequestContext(r.Context(), time.Now().Add(a.cfg.RequestTimeout))
			defer ctx.end()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// requestContext is a request's context with REQUEST_TIMEOUT as its deadline, whose timer starts only when
// something asks whether the request has ended (Done, Err): one answered without waiting on anything (from the
// top cache) never starts one: context.WithTimeout's timer, made and stopped for every request, is a visible
// share of a cached `top`'s CPU. Once started it is context.WithDeadline's context; Deadline and Value never
// start it.
type requestContext struct {
	context.Context // the request's own
	deadline        time.Time

	timed atomic.Pointer[timedContext]
	mu    sync.Mutex // making timed; ended
	ended bool       // the handler returned: a context made after this is canceled at once
}

type timedContext struct {
	context.Context
	cancel context.CancelFunc
}

func newRequestContext(parent context.Context, deadline time.Time) *requestContext {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return &requestContext{Context: parent, deadline: deadline}
}

// start returns the timed context, made on first use.
func (c *requestContext) start() *timedContext {
	if t := c.timed.Load(); t != nil {
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.timed.Load(); t != nil {
		return t
	}
	ctx, cancel := context.WithDeadline(c.Context, c.deadline)
	t := &timedContext{ctx, cancel}
	if c.ended {
		cancel()
	}
	c.timed.Store(t)
	return t
}

// end cancels the context when the handler returns, as context.WithTimeout's cancel did.
func (c *requestContext) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if t := c.timed.Load(); t != nil {
		t.cancel()
	}
}

func (c *requestContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *requestContext) Done() <-chan struct{}       { return c.start().Done() }
func (c *requestContext) Err() error                  { return c.start().Err() }

// Value asks the timed context once there is one: package context finds a parent's cancellation through
// Value, and a child made after Done must find the timed context's (not the request's) to need no goroutine.
func (c *requestContext) Value(key any) any {
	if t := c.timed.Load(); t != nil {
		return t.Value(key)
	}
	return c.Context.Value(key)
}

func (c *requestContext) String() string { return "server.requestContext" }
