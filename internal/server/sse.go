package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// GraphQL over server-sent events (graphql-sse's distinct-connections mode, gqlgen's transport.SSE): a request
// that accepts text/event-stream gets its operation's results as `next` events and a final `complete` event,
// for queries and subscriptions alike. POST carries the request as JSON, as on plain HTTP; GET carries it in the
// URL (query, variables, operationName), which is what a bare EventSource can send, and may not be a mutation.
// A stream lives like a websocket: no REQUEST_TIMEOUT or WRITE_TIMEOUT, counted by MAX_CONNS_PER_ADDR, ended
// at shutdown. Auth, limits and the shared rendering of live updates are those of every other transport.

// isSSE reports whether r asks for an event stream: what gqlgen's SSE transport takes, or the GET form of it.
func isSSE(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return false
	}
	if r.Method == http.MethodGet {
		return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	}
	return transport.SSE{}.Supports(r)
}

// sseGETAsPOST turns an EventSource's GET into the POST that gqlgen's SSE transport reads. ok is false when it
// answered the request itself: a mutation (GET must not change anything) or variables that are not a JSON object.
func sseGETAsPOST(w http.ResponseWriter, r *http.Request, maxTokens int) (*http.Request, bool) {
	q := r.URL.Query()
	body := map[string]any{"query": q.Get("query")}
	if name := q.Get("operationName"); name != "" {
		body["operationName"] = name
	}
	if v := q.Get("variables"); v != "" {
		var vars map[string]any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber() // numbers keep their text, as in a POST body: a score is judged on what the client wrote
		if err := dec.Decode(&vars); err != nil || strings.TrimSpace(v[dec.InputOffset():]) != "" {
			writeError(w, http.StatusBadRequest, codeInvalid, "variables must be a JSON object")
			return nil, false
		}
		body["variables"] = vars
	}
	if e := q.Get("extensions"); e != "" {
		var ext map[string]any
		if err := json.Unmarshal([]byte(e), &ext); err != nil {
			writeError(w, http.StatusBadRequest, codeInvalid, "extensions must be a JSON object")
			return nil, false
		}
		body["extensions"] = ext
	}
	if isMutation(q.Get("query"), q.Get("operationName"), maxTokens) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, codeInvalid, "mutations are not allowed over GET: use POST")
		return nil, false
	}
	b, _ := json.Marshal(body)
	post := r.Clone(r.Context())
	post.Method = http.MethodPost
	post.Header.Set("Content-Type", "application/json")
	post.Body = io.NopCloser(bytes.NewReader(b))
	post.ContentLength = int64(len(b))
	return post, true
}

// isMutation reports whether the operation a GET would run is a mutation (picked like gqlgen: by name, or the
// only one). A document that does not parse is left to gqlgen, which reports it.
func isMutation(query, name string, maxTokens int) bool {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, maxTokens)
	if err != nil {
		return false
	}
	var op *ast.OperationDefinition
	if name == "" && len(doc.Operations) == 1 {
		op = doc.Operations[0]
	} else {
		op = doc.Operations.ForName(name)
	}
	return op != nil && op.Operation == ast.Mutation
}

// sseStream prepares an accepted event stream: no write deadline (the server's WRITE_TIMEOUT would cut it).
func sseStream(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}
