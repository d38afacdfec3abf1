package gqlstream

import (
	"context"
	"errors"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/graph"
)

// wsOperation is one running operation of a session.
type wsOperation struct {
	s           *wsSession
	id          string
	recoverFunc graphql.RecoverFunc // the operation context's
	life        context.Context     // ends with the operation (cancel)
	cancel      context.CancelFunc
	endOnce     sync.Once
}

// run executes the operation and writes its responses. A subscription whose connection writes the rest of it
// (a stream bound to the connection) returns after its first response; its end runs when the stream ends or the
// subscription is stopped (finishStream), and nothing of gqlgen's state of the operation waits for it.
func (o *wsOperation) run(ctx context.Context, rc *graphql.OperationContext) {
	defer func() {
		if r := recover(); r != nil {
			o.panicked(ctx, r)
			o.end()
		}
	}()
	responses, rctx := o.s.exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(rctx)
		if resp == nil {
			break
		}
		o.s.sendResponse(o.id, resp)
		if st := o.s.c.takeBound(o.id); st != nil {
			// The connection writes the rest, and the stream has the last response.
			st.OnEnd(o.life, func() { go o.finishStream(st) })
			return
		}
	}
	o.end()
}

// finishStream takes up a streamed subscription at its end: the stream's last response (graph.LiveStream.Last:
// nil, or the NOT_FOUND of a deleted board), counted as gqlgen's response chain counts it (one count per
// response handler call, the end's nil included), then the end of the operation.
func (o *wsOperation) finishStream(st *graph.LiveStream) {
	defer func() {
		if r := recover(); r != nil {
			o.panicked(o.life, r)
		}
		o.end()
	}()
	metrics := o.s.c.owner.metrics
	resp := st.Last(o.life)
	metrics.CountOperation(string(ast.Subscription), st.Field(), resp)
	if resp != nil {
		o.s.sendResponse(o.id, resp)
		metrics.CountOperation(string(ast.Subscription), st.Field(), nil)
	}
}

func (o *wsOperation) panicked(ctx context.Context, r any) {
	err := o.recoverFunc(ctx, r)
	var gqlerr *gqlerror.Error
	if !errors.As(err, &gqlerr) {
		gqlerr = &gqlerror.Error{}
		if err != nil {
			gqlerr.Message = err.Error()
		}
	}
	o.s.sendError(o.id, gqlerr)
}

// end completes the operation (once) and forgets it.
func (o *wsOperation) end() {
	o.endOnce.Do(func() {
		s := o.s
		if s.ctx.Err() == nil {
			// A cancelled connection context closes the socket; complete would signal a normal end.
			s.send(msgComplete, o.id, nil)
		}
		s.mu.Lock()
		s.active.remove(o.id)
		s.mu.Unlock()
		o.cancel()
	})
}
