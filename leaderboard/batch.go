package leaderboard

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls of concurrent requests to Redis together: each of its lanes takes a call, adds
// whatever other calls are already waiting (up to maxBatch), and runs them as one pipeline. Under load Redis
// then reads and answers many calls per system call; a lone call goes out at once, so light load waits for
// nothing. Every call is still its own atomic script; only the transport is shared.
type batcher struct {
	fns      *functions
	queue    chan *scriptCall
	maxBatch int
	timeout  time.Duration
}

type scriptCall struct {
	script *script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// maxBatch bounds the calls of one pipeline; batchTimeout bounds one pipeline's round trip (go-redis's read and
// write timeouts apply within it).
const (
	maxBatch     = 64
	batchTimeout = 10 * time.Second
)

func newBatcher(fns *functions, lanes int) *batcher {
	b := &batcher{fns: fns, queue: make(chan *scriptCall, lanes*maxBatch), maxBatch: maxBatch, timeout: batchTimeout}
	for range lanes {
		go b.lane()
	}
	return b
}

// run runs a script call through a lane and returns its result. When ctx ends first, run returns at once with
// ctx's error; the call may still run (its outcome is unknown, as for any call cut off in flight).
func (b *batcher) run(ctx context.Context, script *script, keys []string, args ...any) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	c := &scriptCall{script: script, keys: keys, args: args, done: make(chan struct{})}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

func (b *batcher) lane() {
	batch := make([]*scriptCall, 0, b.maxBatch)
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
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		if len(batch) == 1 {
			c.cmd = b.fns.run(ctx, c.script, c.keys, c.args...)
			cancel()
			close(c.done)
			continue
		}
		pipe := b.fns.rdb.Pipeline()
		cmds = cmds[:0]
		for _, c := range batch {
			cmds = append(cmds, b.fns.queue(ctx, pipe, c.script, c.keys, c.args...))
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range batch {
			cmd := cmds[i]
			if ScriptMissing(cmd.Err()) {
				cmd = b.fns.run(ctx, c.script, c.keys, c.args...) // the first use after a Redis restart
			}
			c.cmd = cmd
			close(c.done)
		}
		cancel()
	}
}
