// Package fastpath answers the POST requests that graph.FastPath can run (documents gqlgen ran on the prepared
// path before) as gqlgen's handler and POST transport would: the same status, Content-Type and body. It stands in
// front of gqlgen's handler, behind the top cache (internal/topcache), and reads requests with the decoder the
// two share (gqlhttp.FastBodyParams).
package fastpath

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
)

// New returns a handler that runs on fp the requests it can take, and recovers from a panic in them as gqlgen's
// handler does (presentPanic makes the error). Everything else, and every request the fast path declines, goes to
// next (gqlgen) untouched.
func New(fp *graph.FastPath, presentPanic func(r *http.Request, p any) *gqlerror.Error, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		params, ok := requestParams(fp, r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		defer func() { // as gqlgen's handler.Server.ServeHTTP
			if p := recover(); p != nil {
				b, _ := json.Marshal(&graphql.Response{Errors: []*gqlerror.Error{presentPanic(r, p)}})
				w.WriteHeader(http.StatusInternalServerError)
				w.Write(b)
			}
		}()
		resp, ok := fp.Execute(r.Context(), params)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		// As gqlgen's POST transport: the Content-Type the Accept header asks for, then the response as
		// json.Marshal writes it.
		w.Header().Set("Content-Type", gqlhttp.ResponseContentType(r.Header.Get("Accept")))
		b, err := marshalResponse(resp)
		if err != nil {
			panic(err)
		}
		w.Write(b)
	})
}

// marshalResponse is json.Marshal(resp). A response of data alone whose data encoding/json would copy unchanged
// (no byte it escapes or drops: <, >, &, the first byte of U+2028 and U+2029, whitespace) is written around the
// data without encoding/json's pass over it, which checked and compacted every byte of a friends(100) result again
// (a tenth of that request's server CPU). The data comes from gqlgen's marshalers or graph's encoder, which write
// valid JSON (FuzzMarshalResponse holds the two ways to the same bytes).
func marshalResponse(resp *graphql.Response) ([]byte, error) {
	if len(resp.Errors) > 0 || resp.Label != "" || len(resp.Path) > 0 || resp.HasNext != nil ||
		len(resp.Extensions) > 0 || len(resp.Data) == 0 || !plainJSON(resp.Data) {
		return json.Marshal(resp)
	}
	b := make([]byte, 0, len(resp.Data)+len(`{"data":}`))
	b = append(b, `{"data":`...)
	b = append(b, resp.Data...)
	return append(b, '}'), nil
}

// plainJSON reports whether b holds none of the bytes encoding/json's compaction of a json.RawMessage changes.
func plainJSON(b []byte) bool {
	for _, c := range []byte(" \t\n\r<>&\xe2") {
		if bytes.IndexByte(b, c) >= 0 {
			return false
		}
	}
	return true
}

// requestParams decodes a request that gqlgen's POST transport would take (upgrades never get here: the server
// sends them straight to gqlgen) and whose document the fast path knows, as that transport decodes it. Only a body
// the server read whole before is looked at, and only one FastBodyParams reads: the rest is gqlgen's.
func requestParams(fp *graph.FastPath, r *http.Request) (*graphql.RawParams, bool) {
	if !gqlhttp.IsJSONPost(r) {
		return nil, false
	}
	body, ok := gqlhttp.WholeBody(r)
	if !ok {
		return nil, false
	}
	params, ok := gqlhttp.FastBodyParams(body)
	if !ok || !fp.Known(params.Query, params.OperationName) {
		return nil, false
	}
	params.Headers = r.Header
	return params, true
}
