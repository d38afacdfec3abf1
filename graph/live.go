package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

// liveSchema is the executable schema with one fast path: a topUpdates subscription encodes each update once for
// every subscriber that receives the same content with the same selection, instead of running gqlgen's
// executor over the selection for each of thousands of subscribers. The bytes are gqlgen's own (rendered by the
// generated marshalers); only the version, the one per-subscription field, is spliced in per subscriber.
type liveSchema struct {
	graphql.ExecutableSchema // NewExecutableSchema's
	resolver                 *Resolver
	plans                    *preparedPlans // nil: results are written by the generated marshalers only (prepared.go)
}

// The root types as graphql.CollectFields takes them: the types that fragments on a root field may name.
var (
	queryRoot        = []string{"Query"}
	mutationRoot     = []string{"Mutation"}
	subscriptionRoot = []string{"Subscription"}
)

// Exec runs an operation: the hot queries and mutations on the prepared path (prepared.go), topUpdates
// subscriptions on the shared path, rankUpdates over a connection that writes its streams itself (StreamHolder)
// on a streamed path, everything else as generated.
func (s liveSchema) Exec(ctx context.Context) graphql.ResponseHandler {
	opCtx := graphql.GetOperationContext(ctx)
	if opCtx.Operation.Operation != ast.Subscription {
		if h := s.prepared(opCtx); h != nil {
			return h
		}
		return s.ExecutableSchema.Exec(ctx)
	}
	fields := graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, subscriptionRoot)
	r := s.resolver
	if len(fields) != 1 {
		return s.ExecutableSchema.Exec(ctx)
	}
	holder := payloadHolderFrom(ctx)
	sh, streams := holder.(StreamHolder)
	var stream *LiveStream    // the connection writes the responses after the first itself (StreamHolder)
	end := new(pubsub.Ending) // the hub says here whether it ended the stream for the board's deletion
	ctx = pubsub.WithEnding(ctx, end)
	last := r.deletedEnd(fields[0], opCtx, end)
	if streams {
		stream = newLiveStream(fields[0].Name)
		stream.last = last // what endIfDeleted below answers once the stream has ended
	}
	op := newGeneratedOperation(s.ExecutableSchema, opCtx, make(chan graphql.DeferredResult))
	fctx := graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: "Subscription"})
	var next func(context.Context) graphql.Marshaler
	rendered := true // next's output is compact and HTML-escaped already (renderShared)
	switch {
	case fields[0].Name == "topUpdates":
		next = sharedTopUpdates(fctx, op, opCtx, r, fields[0], sharedKey(opCtx), stream)
	case fields[0].Name == "rankUpdates" && streams:
		next, rendered = streamRankUpdates(fctx, op, opCtx, r, fields[0], stream, s.plans), false
	default:
		return endIfDeleted(last, s.ExecutableSchema.Exec(ctx))
	}
	var buf bytes.Buffer
	streamed := false
	return endIfDeleted(last, func(ctx context.Context) *graphql.Response {
		if streamed {
			stream.wait(ctx.Done())
			return nil
		}
		buf.Reset()
		data := next(ctx)
		if data == nil {
			return nil
		}
		data.MarshalGQL(&buf)
		switch {
		case len(graphql.GetErrors(ctx)) > 0 || holder == nil:
			return &graphql.Response{Data: bytes.Clone(buf.Bytes())}
		case stream != nil && stream.next != nil:
			streamed = true
			out := buf.Bytes()
			if !rendered {
				out = appendWire(nil, out)
			}
			buf = bytes.Buffer{} // the connection writes the rest: an idle subscription keeps no buffer
			return &graphql.Response{Data: strconv.AppendUint(nil, sh.HoldStream(out, stream), 10)}
		case !rendered:
			return &graphql.Response{Data: bytes.Clone(buf.Bytes())}
		}
		return &graphql.Response{Data: heldData(holder, buf.Bytes())} // buf is not touched before it is written
	})
}

// appendWire appends data (JSON from gqlgen's marshalers) to dst as gqlgen's transports write it: compact and
// HTML-escaped, which is what encoding/json makes of a json.RawMessage.
func appendWire(dst, data []byte) []byte {
	var compact, escaped bytes.Buffer
	if json.Compact(&compact, data) != nil {
		return append(dst, data...)
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(dst, escaped.Bytes()...)
}

// fieldPrefix is how ResolveFieldStream starts a subscription's data: {"<alias>":
func fieldPrefix(field graphql.CollectedField) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	graphql.MarshalString(field.Alias).MarshalGQL(&b)
	b.WriteByte(':')
	return b.Bytes()
}

// streamFrom makes a LiveStream's puller for a hub channel: render appends one value's data. pull (when not nil)
// asks the hub to put the newest update in the channel first (pubsub.Hub.SubscribeTopNotify).
func streamFrom[T any](ch <-chan T, pull func(), render func([]byte, T) []byte) func([]byte) ([]byte, bool, bool) {
	return func(dst []byte) ([]byte, bool, bool) {
		if pull != nil {
			pull()
		}
		select {
		case v, ok := <-ch:
			if !ok {
				return dst, false, true
			}
			return render(dst, v), true, false
		default:
			return dst, false, false
		}
	}
}

// streamRankUpdates resolves Subscription.rankUpdates as the generated code does, with the hub's channel and the
// rendering of later entries kept in stream for the connection (StreamHolder). With plans, a later entry whose
// selection is plain fields is written by the prepared results' encoder (encode.go), as the generated marshaler
// writes it; every other one, and any value the encoder leaves to the generated code, goes through the generated
// marshaler.
func streamRankUpdates(ctx context.Context, op generatedOperation, opCtx *graphql.OperationContext, r *Resolver,
	field graphql.CollectedField, stream *LiveStream, plans *preparedPlans) func(context.Context) graphql.Marshaler {
	var ch <-chan *leaderboard.Entry
	return graphql.ResolveFieldStream(ctx, opCtx, field,
		func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return op.subscriptionRankUpdatesFieldContext(ctx, field)
		},
		func(ctx context.Context) (any, error) {
			fc := graphql.GetFieldContext(ctx)
			var err error
			ch, err = r.subscribeRank(ctx, fc.Args["board"].(string), fc.Args["playerId"].(string),
				fc.Args["window"].(*model.Window), stream.notify)
			return ch, err
		},
		nil,
		func(ctx context.Context, sel ast.SelectionSet, e *leaderboard.Entry) graphql.Marshaler {
			if stream.next == nil {
				prefix := fieldPrefix(field)
				var buf bytes.Buffer
				var enc []byte
				plan, planned := plans.selection(field.Field, entrySelKinds)
				stream.next = streamFrom(ch, nil, func(dst []byte, e *leaderboard.Entry) []byte {
					if planned {
						var ok bool
						if enc, ok = appendEntry(enc[:0], plan, e); ok {
							return append(appendWire(append(dst, prefix...), enc), '}')
						}
					}
					buf.Reset()
					op.subscriptionRankUpdatesMarshal(ctx, sel, e).MarshalGQL(&buf)
					return append(appendWire(append(dst, prefix...), buf.Bytes()), '}')
				})
			}
			return op.subscriptionRankUpdatesMarshal(ctx, sel, e)
		},
		true, true)
}

// sharedKey names what the rendering of an update depends on besides the update: the document, the operation and
// the variables (directives such as @include may read them). Interned: every subscription keeps its key, and
// thousands of screens share one.
func sharedKey(opCtx *graphql.OperationContext) string {
	vars, _ := json.Marshal(opCtx.Variables)
	return unique.Make(opCtx.RawQuery + "\x00" + opCtx.OperationName + "\x00" + string(vars)).Value()
}

// sharedTopUpdates resolves Subscription.topUpdates as the generated code does, with the hub's updates marshaled
// through TopUpdate.Shared. With a stream, the hub's channel and the rendering of later updates are kept in it for
// the connection (StreamHolder).
func sharedTopUpdates(ctx context.Context, op generatedOperation, opCtx *graphql.OperationContext, r *Resolver,
	field graphql.CollectedField, key string, stream *LiveStream) func(context.Context) graphql.Marshaler {
	var notify func()
	if stream != nil {
		notify = stream.notify
	}
	var ch <-chan *pubsub.TopUpdate
	var pull func()
	return graphql.ResolveFieldStream(ctx, opCtx, field,
		func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return op.subscriptionTopUpdatesFieldContext(ctx, field)
		},
		func(ctx context.Context) (any, error) {
			fc := graphql.GetFieldContext(ctx)
			var err error
			ch, pull, err = r.subscribeTop(ctx, fc.Args["board"].(string), fc.Args["first"].(*int),
				fc.Args["window"].(*model.Window), fc.Args["period"].(*string), notify)
			return ch, err
		},
		nil,
		func(ctx context.Context, sel ast.SelectionSet, u *pubsub.TopUpdate) graphql.Marshaler {
			if stream != nil && stream.next == nil {
				prefix := fieldPrefix(field)
				rd := r.renderers.acquire(key, op, ctx, sel)
				context.AfterFunc(lifetime(ctx), func() { r.renderers.release(key, rd) })
				stream.next = streamFrom(ch, pull, func(out []byte, u *pubsub.TopUpdate) []byte {
					out = append(out, prefix...)
					parts := u.Shared(key, rd.renderShared)
					if len(parts) > 0 && parts[0] == 0 {
						out = append(out, renderOne(rd.ctx, rd.op, rd.sel, u)...)
					} else {
						out = versioned{parts: parts, version: u.Version}.append(out)
					}
					return append(out, '}')
				})
			}
			parts := u.Shared(key, func(u *pubsub.TopUpdate) []byte { return renderShared(ctx, op, sel, u) })
			if len(parts) > 0 && parts[0] == 0 {
				return op.subscriptionTopUpdatesMarshal(ctx, sel, topUpdateModel(u, u.Version))
			}
			return versioned{parts: parts, version: u.Version}
		},
		true, true)
}

// topRenderers hold, by shared key (sharedKey: a document with its variables, which renders every update alike),
// what renders the later updates of a server's streamed topUpdates subscriptions: the generated operation, field
// context and selection of one running subscription of the key, shared by all of them while any runs. Each
// subscription holding its own kept its operation's whole gqlgen state (operation context, variables, arguments,
// field contexts and caches, ~2.5 KB) for as long as the screen stayed open.
type topRenderers struct {
	mu sync.Mutex
	m  map[string]*topRenderer
}

type topRenderer struct {
	op   generatedOperation
	ctx  context.Context
	sel  ast.SelectionSet
	refs int // subscriptions using it (under topRenderers.mu)
}

// acquire returns key's renderer, made of op, ctx and sel when the key has none; release gives it back.
func (t *topRenderers) acquire(key string, op generatedOperation, ctx context.Context, sel ast.SelectionSet) *topRenderer {
	t.mu.Lock()
	defer t.mu.Unlock()
	rd := t.m[key]
	if rd == nil {
		if t.m == nil {
			t.m = map[string]*topRenderer{}
		}
		rd = &topRenderer{op: op, ctx: ctx, sel: sel}
		t.m[key] = rd
	}
	rd.refs++
	return rd
}

func (t *topRenderers) release(key string, rd *topRenderer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rd.refs--; rd.refs == 0 && t.m[key] == rd {
		delete(t.m, key)
	}
}

func (rd *topRenderer) renderShared(u *pubsub.TopUpdate) []byte {
	return renderShared(rd.ctx, rd.op, rd.sel, u)
}

// renderOne renders an update for one subscriber, compact and HTML-escaped like renderShared.
func renderOne(ctx context.Context, op generatedOperation, sel ast.SelectionSet, u *pubsub.TopUpdate) []byte {
	var buf bytes.Buffer
	op.subscriptionTopUpdatesMarshal(ctx, sel, topUpdateModel(u, u.Version)).MarshalGQL(&buf)
	return appendWire(nil, buf.Bytes())
}

// renderShared renders an update with gqlgen's marshalers twice, with versions 1 and 2, and returns the output
// with a NUL byte wherever the two differ: the places of the version. JSON output never contains a raw NUL.
// When the two renderings differ in any other way, the result starts with NUL and holds no bytes to share.
// The output is compact and HTML-escaped, as encoding/json leaves a json.RawMessage it marshals (what gqlgen's
// transports do with every response), so that it can be written as it is (PayloadHolder).
func renderShared(ctx context.Context, op generatedOperation, sel ast.SelectionSet, u *pubsub.TopUpdate) []byte {
	sharedRenders.Add(1)
	render := func(version int64) []byte {
		var buf bytes.Buffer
		op.subscriptionTopUpdatesMarshal(ctx, sel, topUpdateModel(u, version)).MarshalGQL(&buf)
		return appendWire(nil, buf.Bytes())
	}
	a, b := render(1), render(2)
	if len(a) != len(b) {
		return []byte{0}
	}
	for i := range a {
		if a[i] != b[i] {
			if a[i] != '1' || b[i] != '2' {
				return []byte{0}
			}
			a[i] = 0
		}
	}
	return a
}

var sharedRenders atomic.Int64

// SharedRenders returns how many topUpdates payloads were rendered for sharing since the process started (each
// is then sent to every subscriber that receives the same update with the same selection).
func SharedRenders() int64 { return sharedRenders.Load() }

// versioned writes shared bytes with the subscriber's version in place of each NUL.
type versioned struct {
	parts   []byte
	version int64
}

func (v versioned) MarshalGQL(w io.Writer) {
	ver := strconv.AppendInt(nil, v.version, 10)
	rest := v.parts
	for {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			w.Write(rest)
			return
		}
		w.Write(rest[:i])
		w.Write(ver)
		rest = rest[i+1:]
	}
}

// append appends the shared bytes with the version in place of each NUL to dst.
func (v versioned) append(dst []byte) []byte {
	dst = slices.Grow(dst, len(v.parts)+8)
	rest := v.parts
	for {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return append(dst, rest...)
		}
		dst = append(dst, rest[:i]...)
		dst = strconv.AppendInt(dst, v.version, 10)
		rest = rest[i+1:]
	}
}

// topUpdateModel converts a hub update to the GraphQL model with the given version.
func topUpdateModel(u *pubsub.TopUpdate, version int64) *model.TopUpdate {
	m := &model.TopUpdate{Board: u.Board, Window: model.Window(u.Window), Period: u.Period, Version: int(version),
		Snapshot: u.Snapshot, Entries: u.Entries, Removed: u.Removed, Size: int(u.Size)}
	if m.Entries == nil {
		m.Entries = []leaderboard.Entry{}
	}
	if m.Removed == nil {
		m.Removed = []string{}
	}
	return m
}

// subscribeTop validates a topUpdates subscription, takes a subscription slot of the connection and subscribes
// to the hub. The slot and the hub subscription are released when ctx ends: gqlgen ends it when the subscription
// completes, also when the hub closes the channel. notify and pull: see pubsub.Hub.SubscribeTopNotify.
func (r *Resolver) subscribeTop(ctx context.Context, board string, first *int, window *model.Window,
	period *string, notify func()) (<-chan *pubsub.TopUpdate, func(), error) {
	n := deref(first, 10)
	if n < 1 || n > MaxLiveFirst {
		return nil, nil, newError(leaderboard.Invalid, "first must be between 1 and 100")
	}
	if err := r.startSubscription(ctx, "topUpdates"); err != nil {
		return nil, nil, err
	}
	in, pull, err := r.Hub.SubscribeTopNotify(hubContext(ctx), view(board, window, period), n, notify)
	if err != nil {
		return nil, nil, internal(err)
	}
	return in, pull, nil
}

// subscribeRank takes a subscription slot of the connection and subscribes to one player's entry in the hub;
// both are released when ctx ends. notify: see pubsub.Hub.SubscribeRankNotify.
func (r *Resolver) subscribeRank(ctx context.Context, board, player string, window *model.Window,
	notify func()) (<-chan *leaderboard.Entry, error) {
	if err := r.startSubscription(ctx, "rankUpdates"); err != nil {
		return nil, err
	}
	in, err := r.Hub.SubscribeRankNotify(hubContext(ctx), view(board, window, nil), player, notify)
	if err != nil {
		return nil, internal(err)
	}
	return in, nil
}
