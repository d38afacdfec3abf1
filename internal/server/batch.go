package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/mediatype"
)

// batches answers a POST whose JSON body is an array of GraphQL requests (Apollo's BatchHttpLink, many other
// clients' batching) with the array of their responses, in order. Each operation runs through next on its own,
// as if it had been posted alone (its own errors, auth and top cache), one after another, so a batch never takes
// more of the server at once than one request; the whole batch shares one REQUEST_TIMEOUT and one budget of the
// request limits (newBudget, see graph.Budget): complexity, fields and answer bytes bound the batch as they bound
// one request, and an operation over what the ones before it left is refused in its place. A batch holds 1 to max
// operations (MAX_BATCH; 0: batches are refused); anything else is a BAD_USER_INPUT 400. Everything that is not a
// batch goes to next untouched.
func batches(max int, timeout time.Duration, newBudget func() *graph.Budget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := batchBody(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		var ops []json.RawMessage
		if err := json.Unmarshal(body, &ops); err != nil {
			gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, "the batch is not a JSON array of requests")
			return
		}
		if max <= 0 {
			gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, "batched requests are not accepted here: send one request per POST")
			return
		}
		if len(ops) == 0 || len(ops) > max {
			gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid,
				"a batch holds 1 to "+strconv.Itoa(max)+" requests, this one "+strconv.Itoa(len(ops)))
			return
		}
		ctx := r.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		budget := newBudget()
		out := []byte{'['}
		contentType := ""
		for i, op := range ops {
			sub := r.Clone(budget.Operation(ctx))
			sub.Body = newReadBody(op) // read whole, as limitBody leaves a request's: the fast path takes it too
			sub.ContentLength = int64(len(op))
			rec := &batchRecorder{header: http.Header{}}
			next.ServeHTTP(rec, sub)
			if contentType == "" {
				contentType = rec.header.Get("Content-Type")
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, bytes.TrimSpace(rec.body.Bytes())...)
		}
		out = append(out, ']')
		if contentType == "" {
			contentType = "application/json"
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Write(out)
	})
}

// batchBody returns the body of a JSON POST that starts with '[' (a batch), leaving r readable either way.
func batchBody(r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("Upgrade") != "" || gqlstream.IsEventStream(r) {
		return nil, false
	}
	if !mediatype.IsJSON(r.Header.Get("Content-Type")) {
		return nil, false
	}
	var body []byte
	if rb, ok := r.Body.(*readBody); ok {
		body = rb.Bytes() // read and bounded by limitBody
	} else {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, false
		}
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return body, len(trimmed) > 0 && trimmed[0] == '['
}

// batchRecorder keeps one operation's response. Its body is what gqlgen (or the top cache, or a middleware's
// error) wrote: within what the batch's budget left of MAX_RESPONSE_BYTES, but for a mutation's answer.
type batchRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *batchRecorder) Header() http.Header { return b.header }

func (b *batchRecorder) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *batchRecorder) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
