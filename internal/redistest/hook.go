package redistest

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Commands is a go-redis hook that calls See with every command a client sends, alone or in a pipeline, before it
// goes out: tests count what a store sends (client.AddHook(redistest.Commands{See: ...})). See may be called from
// many goroutines at once.
type Commands struct{ See func(redis.Cmder) }

func (h Commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h Commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.See(cmd)
		return next(ctx, cmd)
	}
}

func (h Commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.See(cmd)
		}
		return next(ctx, cmds)
	}
}

// Gate is a go-redis hook that holds a client's commands while it is shut: every command, or only those named
// (lower case, as redis.Cmder's Name) when names are given; a pipeline waits when it holds one of them. A held
// command goes out when the gate is released or fails with its context's error. Tests use it to make one
// server's or hub's reads slower than another's writes (client.AddHook(g)).
type Gate struct {
	names map[string]bool // nil: every command
	mu    sync.Mutex
	open  chan struct{} // closed while the gate is open
}

// NewGate returns an open gate for the commands named (none: all).
func NewGate(names ...string) *Gate {
	g := &Gate{open: make(chan struct{})}
	if len(names) > 0 {
		g.names = map[string]bool{}
		for _, n := range names {
			g.names[n] = true
		}
	}
	close(g.open)
	return g
}

// Shut holds the gate's commands from now on, until Release.
func (g *Gate) Shut() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

// Release lets the held commands go and opens the gate.
func (g *Gate) Release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *Gate) holds(cmd redis.Cmder) bool { return g.names == nil || g.names[cmd.Name()] }

func (g *Gate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *Gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.holds(cmd) {
			if err := g.wait(ctx); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (g *Gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, g.holds) {
			if err := g.wait(ctx); err != nil {
				return err
			}
		}
		return next(ctx, cmds)
	}
}
