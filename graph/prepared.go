package graph

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Prepared results: the hot operations (a mutation of one submitScore or submitScores, a query of one rank,
// aroundMe or friends) run as the generated code runs them, field context, arguments, root middleware
// (ReadGuard), resolver, errors and panics included, except for the last step: the result is written by the
// encoder of encode.go for the selection compiled once per document, instead of by the generated marshalers (a
// field context, a closure and a middleware call per field, a goroutine per list element: 0.52 s of the 5.17 s
// a submitScore profile took, twice the store call). Only selections of plain fields are prepared (no fragments,
// no directives, no alias twice); everything else, and any value the generated code would answer with an error,
// goes the generated way. TestPreparedResultsMatchGqlgen holds the two byte for byte.
//
// The arguments are decoded by the generated unmarshalers of their types without the path context and closure
// gqlgen adds per argument, input field and list element for the sake of an error's path; a value an
// unmarshaler refuses goes to gqlgen's decoding, which reports it. Both ways, and the marshalers the encoder
// falls back on, are generatedOperation's (operation_generated.go, written by cmd/gqlgen's plugin);
// TestPreparedArgsMatchGenerated holds the two ways to the same field contexts.

// preparedRoot is the root field a plan runs.
type preparedRoot uint8

const (
	prepSubmitScore preparedRoot = iota + 1
	prepSubmitScores
	prepRank
	prepAroundMe
	prepFriends
)

var preparedRoots = map[string]struct {
	op    ast.Operation
	root  preparedRoot
	kinds map[string]selKind
}{
	"submitScore":  {ast.Mutation, prepSubmitScore, scoreResultSelKinds},
	"submitScores": {ast.Mutation, prepSubmitScores, scoreResultSelKinds},
	"rank":         {ast.Query, prepRank, entrySelKinds},
	"aroundMe":     {ast.Query, prepAroundMe, entrySelKinds},
	"friends":      {ast.Query, prepFriends, entrySelKinds},
}

// preparedPlan is a prepared root field: what it runs and its compiled selection.
type preparedPlan struct {
	root preparedRoot
	sel  []selField
	// fields is graphql.CollectFields of the operation, made at its first run: a prepared operation has no
	// directives or fragments, so it is the same for every request of the document.
	fields atomic.Pointer[[]graphql.CollectedField]
}

// Bounds of the plan cache: plans of documents up to maxPreparedSource bytes are kept (a plan holds its
// document's field, and so its source, for as long as it is kept); the cache is emptied when it holds
// maxPreparedPlans. Larger documents are compiled for each request (a walk of their root field's selection).
const (
	maxPreparedPlans  = 4096
	maxPreparedSource = 16 << 10
)

// preparedPlans remembers plans by their document's root field (gqlgen's query cache hands out the same
// document for the same query text).
type preparedPlans struct {
	mu   sync.RWMutex
	m    map[*ast.Field]*preparedPlan
	reqs fastRequests // the documents gqlgen ran on the prepared path, for the fast path (fastpath.go)
}

func newPreparedPlans() *preparedPlans { return &preparedPlans{m: map[*ast.Field]*preparedPlan{}} }

// plan returns the plan of an operation, nil when it is not one that is prepared.
func (c *preparedPlans) plan(op *ast.OperationDefinition) *preparedPlan {
	if len(op.SelectionSet) != 1 || len(op.Directives) > 0 {
		return nil
	}
	f, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || len(f.Directives) > 0 {
		return nil
	}
	r, ok := preparedRoots[f.Name]
	if !ok || r.op != op.Operation {
		return nil
	}
	c.mu.RLock()
	p, ok := c.m[f]
	c.mu.RUnlock()
	if ok {
		return p
	}
	sel, ok := compileSelection(f.SelectionSet, r.kinds)
	if !ok {
		return nil
	}
	p = &preparedPlan{root: r.root, sel: sel}
	c.keep(f, p)
	return p
}

// selection returns the compiled selection of f, a field of a type whose fields are kinds (false: not one the
// encoder writes, or c is nil), kept as plans are.
func (c *preparedPlans) selection(f *ast.Field, kinds map[string]selKind) ([]selField, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.RLock()
	p, ok := c.m[f]
	c.mu.RUnlock()
	if ok {
		return p.sel, true
	}
	sel, ok := compileSelection(f.SelectionSet, kinds)
	if !ok {
		return nil, false
	}
	c.keep(f, &preparedPlan{sel: sel})
	return sel, true
}

// keep remembers p as f's plan when f's document is small enough (maxPreparedSource).
func (c *preparedPlans) keep(f *ast.Field, p *preparedPlan) {
	if f.Position != nil && f.Position.Src != nil && len(f.Position.Src.Input) <= maxPreparedSource {
		c.mu.Lock()
		if len(c.m) >= maxPreparedPlans {
			clear(c.m)
		}
		c.m[f] = p
		c.mu.Unlock()
	}
}

// prepared returns the response handler of a prepared operation, nil for any other. It runs one query or
// mutation field as the generated Exec does, with the field run by preparedField.
func (s liveSchema) prepared(opCtx *graphql.OperationContext) graphql.ResponseHandler {
	if s.plans == nil {
		return nil
	}
	p := s.plans.plan(opCtx.Operation)
	if p == nil {
		return nil
	}
	s.plans.remember(opCtx)
	preparedOps.Add(1)
	op := newGeneratedOperation(s.ExecutableSchema, opCtx, nil) // no @defer in a prepared document
	object, implementors := "Query", queryRoot
	if opCtx.Operation.Operation == ast.Mutation {
		object, implementors = "Mutation", mutationRoot
	}
	first := true
	return func(ctx context.Context) *graphql.Response {
		if !first {
			return nil
		}
		first = false
		ctx = graphql.WithLazyInputUnmarshalerIndex(ctx, op.inputUnmarshalers)
		fields := p.fields.Load()
		if fields == nil {
			f := graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, implementors)
			fields = &f
			p.fields.Store(fields)
		}
		field := (*fields)[0]
		ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: object})
		innerCtx := graphql.WithRootFieldContext(ctx, &graphql.RootFieldContext{Object: field.Name, Field: field})
		var v graphql.Marshaler
		invalid := graphql.Null // the value that makes the root object null: Null for a non-null field
		if object == "Mutation" {
			v = opCtx.RootResolverMiddleware(innerCtx, func(ctx context.Context) graphql.Marshaler {
				return preparedField(ctx, op, opCtx, s.resolver, field, p)
			})
		} else {
			if p.root == prepRank {
				invalid = graphql.RequiredNull // rank is nullable (FieldSet.ResolveRootConcurrently)
			}
			v = opCtx.RootResolverMiddleware(innerCtx, func(ctx context.Context) (res graphql.Marshaler) {
				defer func() { // recoverToNull
					if r := recover(); r != nil {
						opCtx.Error(ctx, opCtx.Recover(ctx, r))
						res = graphql.Null
					}
				}()
				return preparedField(ctx, op, opCtx, s.resolver, field, p)
			})
		}
		if v == invalid {
			return &graphql.Response{Data: []byte("null")}
		}
		data := bytes.NewBuffer(fieldPrefix(field)) // {"alias":
		if e, ok := v.(encoded); ok {
			data.Grow(len(e) + 1)
			data.Write(e)
		} else {
			v.MarshalGQL(data) // null, or what the generated marshaler wrote
		}
		data.WriteByte('}')
		return &graphql.Response{Data: data.Bytes()}
	}
}

// preparedField resolves a prepared root field as the generated code does (the same field context, resolver call
// and null rule), with the arguments decoded the prepared way, and encodes the result for the plan's selection.
func preparedField(ctx context.Context, op generatedOperation, opCtx *graphql.OperationContext, r *Resolver,
	field graphql.CollectedField, p *preparedPlan) graphql.Marshaler {
	args := func(ctx context.Context) map[string]any { return graphql.GetFieldContext(ctx).Args }
	entries := func(v []leaderboard.Entry) ([]byte, bool) {
		return appendEntries(make([]byte, 0, 256*len(v)+2), p.sel, v)
	}
	switch p.root {
	case prepSubmitScore:
		return resolvePrepared(ctx, opCtx, field, op.mutationSubmitScorePreparedFieldContext,
			func(ctx context.Context) (any, error) {
				return r.Mutation().SubmitScore(ctx, args(ctx)["input"].(model.ScoreInput))
			},
			func(v *leaderboard.Result) ([]byte, bool) {
				if v == nil {
					return nil, false // the generated marshaler's error for a null ScoreResult!
				}
				return appendScoreResult(make([]byte, 0, 384), p.sel, v)
			},
			op.mutationSubmitScoreMarshal, true)
	case prepSubmitScores:
		return resolvePrepared(ctx, opCtx, field, op.mutationSubmitScoresPreparedFieldContext,
			func(ctx context.Context) (any, error) {
				return r.Mutation().SubmitScores(ctx, args(ctx)["inputs"].([]model.ScoreInput))
			},
			func(v []*leaderboard.Result) ([]byte, bool) {
				return appendScoreResults(make([]byte, 0, 384*len(v)+2), p.sel, v)
			},
			op.mutationSubmitScoresMarshal, true)
	case prepRank:
		return resolvePrepared(ctx, opCtx, field, op.queryRankPreparedFieldContext,
			func(ctx context.Context) (any, error) {
				a := args(ctx)
				return r.Query().Rank(ctx, a["board"].(string), a["playerId"].(string),
					a["window"].(*model.Window), a["period"].(*string))
			},
			func(v *leaderboard.Entry) ([]byte, bool) {
				if v == nil {
					return nil, false // the generated marshaler's null
				}
				return appendEntry(make([]byte, 0, 256), p.sel, v)
			},
			op.queryRankMarshal, false)
	case prepAroundMe:
		return resolvePrepared(ctx, opCtx, field, op.queryAroundMePreparedFieldContext,
			func(ctx context.Context) (any, error) {
				a := args(ctx)
				return r.Query().AroundMe(ctx, a["board"].(string), a["playerId"].(string),
					a["radius"].(*int), a["window"].(*model.Window), a["period"].(*string))
			},
			entries, op.queryAroundMeMarshal, true)
	case prepFriends:
		return resolvePrepared(ctx, opCtx, field, op.queryFriendsPreparedFieldContext,
			func(ctx context.Context) (any, error) {
				a := args(ctx)
				return r.Query().Friends(ctx, a["board"].(string), a["playerId"].(string),
					a["friendIds"].([]string), a["window"].(*model.Window), a["period"].(*string))
			},
			entries, op.queryFriendsMarshal, true)
	}
	panic("unknown prepared root")
}

// resolvePrepared is graphql.ResolveField with the result written by encode, or, for a value encode declines
// (ok false), by generated, the field's generated marshaler.
func resolvePrepared[T any](ctx context.Context, opCtx *graphql.OperationContext, field graphql.CollectedField,
	fieldContext func(context.Context, graphql.CollectedField) (*graphql.FieldContext, error),
	resolve func(context.Context) (any, error), encode func(T) ([]byte, bool),
	generated func(context.Context, ast.SelectionSet, T) graphql.Marshaler, nonNull bool) graphql.Marshaler {
	return graphql.ResolveField(ctx, opCtx, field, fieldContext, resolve, nil,
		func(ctx context.Context, sel ast.SelectionSet, v T) graphql.Marshaler {
			if b, ok := encode(v); ok {
				return encoded(b)
			}
			return generated(ctx, sel, v)
		}, true, nonNull)
}

var preparedOps atomic.Int64

// PreparedOperations returns how many operations took the prepared path since the process started.
func PreparedOperations() int64 { return preparedOps.Load() }
