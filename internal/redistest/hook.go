package redistest

import (
	"context"

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
