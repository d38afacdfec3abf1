package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

// hubContext is the context a subscription subscribes to the hub with: the subscription's lifetime, carrying the
// Ending that Exec made for it (deletedEnd reads it when the stream ends).
func hubContext(ctx context.Context) context.Context {
	life := lifetime(ctx)
	if e := pubsub.EndingFrom(ctx); e != nil && pubsub.EndingFrom(life) != e {
		life = pubsub.WithEnding(life, e)
	}
	return life
}

// endIfDeleted wraps the responses of a subscription on a board: when the stream ends, last answers (deletedEnd:
// NOT_FOUND when the client still listens and the hub ended the stream because the board was deleted, or the
// board no longer exists); then the subscription completes.
func endIfDeleted(last, next graphql.ResponseHandler) graphql.ResponseHandler {
	ended := false
	return func(ctx context.Context) *graphql.Response {
		if ended {
			return nil
		}
		resp := next(ctx)
		if resp != nil {
			return resp
		}
		ended = true
		return last(ctx)
	}
}

// deletedEnd returns the last response of a subscription on a board (the field's board argument) whose stream
// has ended (see endIfDeleted): NOT_FOUND when the client still listens and either the hub ended the stream
// because the board was deleted (end, which the subscription passed to the hub: also when the id was created
// again since, whose subscriptions are new ones) or the board no longer exists; else nil. It keeps only the
// board's id and end.
func (r *Resolver) deletedEnd(field graphql.CollectedField, opCtx *graphql.OperationContext,
	end *pubsub.Ending) graphql.ResponseHandler {
	board, _ := field.ArgumentMap(opCtx.Variables)["board"].(string)
	return func(ctx context.Context) *graphql.Response {
		if board == "" || ctx.Err() != nil {
			return nil
		}
		if !end.Deleted() {
			if r.Store == nil {
				return nil
			}
			if gone, err := r.Store.Gone(ctx, board); err != nil || !gone {
				return nil
			}
		}
		return &graphql.Response{Errors: gqlerror.List{{
			Message:    "no leaderboard with id " + quote(board),
			Path:       graphql.GetPath(ctx),
			Extensions: map[string]any{"code": string(leaderboard.NotFound)},
		}}}
	}
}
