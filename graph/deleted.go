package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// endIfDeleted wraps the responses of a subscription on a board (the field's board argument): when the stream
// ends although the client still listens (the hub closes a deleted board's subscriptions), and the board no
// longer exists in Redis, the last response is a NOT_FOUND error; then the subscription completes.
func (r *Resolver) endIfDeleted(field graphql.CollectedField, opCtx *graphql.OperationContext,
	next graphql.ResponseHandler) graphql.ResponseHandler {
	board, _ := field.ArgumentMap(opCtx.Variables)["board"].(string)
	ended := false
	return func(ctx context.Context) *graphql.Response {
		if ended {
			return nil
		}
		resp := next(ctx)
		if resp != nil || board == "" || r.Store == nil || ctx.Err() != nil {
			return resp
		}
		ended = true
		if exists, err := r.Store.Exists(ctx, board); err != nil || exists {
			return nil
		}
		return &graphql.Response{Errors: gqlerror.List{{
			Message:    "no leaderboard with id " + quote(board),
			Path:       graphql.GetPath(ctx),
			Extensions: map[string]any{"code": string(leaderboard.NotFound)},
		}}}
	}
}
