package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// endIfDeleted wraps the responses of a subscription on a board: when the stream ends, last answers (deletedEnd:
// NOT_FOUND when the client still listens and the board no longer exists, as when the hub closes a deleted
// board's subscriptions); then the subscription completes.
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
// has ended (see endIfDeleted): NOT_FOUND when the client still listens and the board no longer exists, else nil.
// It keeps only the board's id.
func (r *Resolver) deletedEnd(field graphql.CollectedField, opCtx *graphql.OperationContext) graphql.ResponseHandler {
	board, _ := field.ArgumentMap(opCtx.Variables)["board"].(string)
	return func(ctx context.Context) *graphql.Response {
		if board == "" || r.Store == nil || ctx.Err() != nil {
			return nil
		}
		if gone, err := r.Store.Gone(ctx, board); err != nil || !gone {
			return nil
		}
		return &graphql.Response{Errors: gqlerror.List{{
			Message:    "no leaderboard with id " + quote(board),
			Path:       graphql.GetPath(ctx),
			Extensions: map[string]any{"code": string(leaderboard.NotFound)},
		}}}
	}
}
