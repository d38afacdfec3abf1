package gqlstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/leaderboard/leaderboard/internal/mediatype"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// GraphQL over server-sent events (graphql-sse's distinct-connections mode): a request whose Accept prefers
// text/event-stream gets its operation's results as `next` events and a final `complete` event, for queries and
// subscriptions alike. POST carries the request as JSON, as on plain HTTP; GET carries it in the URL (query,
// variables, operationName, extensions), which is what a bare EventSource can send, and never runs a mutation. A
// stream lives like a websocket: no REQUEST_TIMEOUT, WRITE_TIMEOUT or READ_TIMEOUT, counted by MAX_CONNS_PER_ADDR,
// ended at shutdown; a write the client does not take within the websocket write timeout closes it
// (ssestream.go). Auth, limits and the shared rendering of live updates are those of every other transport.

// IsEventStream reports whether r asks for an event stream: a GET, or a POST of JSON, whose Accept prefers one.
func IsEventStream(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return false
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		if !mediatype.IsJSON(r.Header.Get("Content-Type")) {
			return false
		}
	default:
		return false
	}
	return mediatype.PrefersEventStream(r.Header)
}

// sseTransport is the event-stream transport (a graphql.Transport, run by gqlgen's handler before its GET and POST
// transports). Its streams are registered with streams, which ends them at shutdown (Streams.stream).
type sseTransport struct {
	streams      *Streams
	pingInterval time.Duration // a `: ping` comment after this long without an event (WS_PING_INTERVAL)
}

var _ graphql.Transport = sseTransport{}

func (sseTransport) Supports(r *http.Request) bool { return IsEventStream(r) }

// Do answers one event-stream request. Nothing is written before the operation is known: an undecodable request
// is a 400 and a mutation over GET a 405, with JSON bodies; then the stream opens, and the operation's results
// (or the errors of an operation that does not run) come as events.
func (t sseTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	start := graphql.Now()
	var params *graphql.RawParams
	var err error
	if r.Method == http.MethodGet {
		params, err = gqlhttp.URLParams(r)
	} else {
		params, err = bodyParams(r)
	}
	if err != nil {
		gqlhttp.WriteError(w, http.StatusBadRequest, string(leaderboard.Invalid), err.Error())
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	ctx := r.Context()
	rc, errs := exec.CreateOperationContext(ctx, params)
	if r.Method == http.MethodGet && gqlhttp.IsMutation(rc) {
		gqlhttp.RefuseGETMutation(w)
		return
	}
	s := newSSEStream(w, r, t.streams.netConn(r), t.streams.streamWriteTimeout(), t.pingInterval)
	defer s.end()
	if !s.open() {
		return
	}
	if errs != nil {
		resp := exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		s.serve(func(ctx context.Context, send func([]byte) bool) { send(sseNext(resp, nil)) })
		return
	}
	s.serve(func(ctx context.Context, send func([]byte) bool) { runOperation(ctx, exec, rc, send) })
}

// runOperation runs the operation of rc and hands each response, as an event, to send, until there are no more
// or send refuses one (the stream has ended). A panic is answered as gqlgen's transports answer it: an error
// through the operation's recover function.
func runOperation(ctx context.Context, exec graphql.GraphExecutor, rc *graphql.OperationContext, send func([]byte) bool) {
	held := &sseHeld{}
	// topUpdates hands its rendered data over as it is (graph.PayloadHolder): every subscriber of an update gets
	// the same bytes, rendered once, and they are not validated and compacted again per subscriber.
	ctx = graph.WithPayloadHolder(ctx, held)
	defer func() {
		if p := recover(); p != nil {
			err := rc.RecoverFunc(ctx, p)
			var gqlErr *gqlerror.Error
			if !errors.As(err, &gqlErr) {
				gqlErr = &gqlerror.Error{Message: "internal error"}
			}
			send(sseNext(&graphql.Response{Errors: gqlerror.List{gqlErr}}, nil))
		}
	}()
	responses, ctx := exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(ctx)
		if resp == nil || !send(sseNext(resp, held)) {
			return
		}
	}
}

// bodyParams decodes a POST's JSON body as gqlgen's POST transport does.
func bodyParams(r *http.Request) (*graphql.RawParams, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, errors.New("could not read the request body")
	}
	params, err := gqlhttp.BodyParams(body)
	if err != nil {
		return nil, errors.New("the request body is not a GraphQL request (a JSON object): " + err.Error())
	}
	return params, nil
}

// Events of the stream (graphql-sse's distinct-connections mode). complete carries an empty data line: a browser's
// EventSource dispatches no event without one, and a client that never sees complete reconnects and runs the
// operation again, every 3 s.
var (
	sseOpenComment = []byte(":\n\n")
	ssePing        = []byte(": ping\n\n")
	sseComplete    = []byte("event: complete\ndata:\n\n")
	sseNextPrefix  = []byte("event: next\ndata: ")
)

// sseNext encodes resp as a next event: its JSON as encoding/json writes a graphql.Response (one line: JSON's
// own line breaks are escaped), with data held by held (nil: none) put back in place of its token.
func sseNext(resp *graphql.Response, held *sseHeld) []byte {
	if data, ok := held.take(resp); ok {
		if len(resp.Errors) == 0 && resp.Label == "" && resp.Path == nil && resp.HasNext == nil && len(resp.Extensions) == 0 {
			// The held bytes are compact and HTML-escaped already (graph.PayloadHolder): exactly what
			// encoding/json would write for them, without validating them again.
			ev := make([]byte, 0, len(sseNextPrefix)+len(`{"data":}`)+len(data)+2)
			ev = append(ev, sseNextPrefix...)
			ev = append(ev, `{"data":`...)
			ev = append(ev, data...)
			return append(ev, "}\n\n"...)
		}
		resp.Data = data
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(&graphql.Response{Errors: gqlerror.List{{Message: "internal error",
			Extensions: map[string]any{"code": string(leaderboard.Internal)}}}})
	}
	ev := make([]byte, 0, len(sseNextPrefix)+len(b)+2)
	ev = append(ev, sseNextPrefix...)
	ev = append(ev, b...)
	return append(ev, "\n\n"...)
}

// sseHeld keeps the rendered data of one topUpdates response between the executor and the encoding of its event
// (graph.PayloadHolder). Only the goroutine that runs the operation uses it, and it encodes each response before
// it asks for the next, so one is held at a time.
type sseHeld struct {
	token uint64
	data  []byte
}

func (h *sseHeld) Hold(data []byte) uint64 {
	h.token++
	h.data = data
	return h.token
}

// take returns the held data when resp's data is its token, and forgets it either way.
func (h *sseHeld) take(resp *graphql.Response) ([]byte, bool) {
	if h == nil || h.data == nil {
		return nil, false
	}
	data := h.data
	h.data = nil
	return data, string(resp.Data) == strconv.FormatUint(h.token, 10)
}
