package topcache

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/internal/gqlhttp"
	"github.com/leaderboard/leaderboard/internal/mediatype"
)

// preparedRequest is a decoded top-only request: the lists it reads and the request part of its response key.
type preparedRequest struct {
	reads []topRead
	key   string
}

// prepare returns what a request reads, or nil when the cache leaves it to gqlgen. Requests are decoded once per
// distinct method and body (or URL query) and remembered, so a repeated request costs a map lookup, not JSON
// decoding. It leaves r.Body readable again.
func (c *Cache) prepare(r *http.Request) *preparedRequest {
	raw, ok := requestBytes(r)
	if !ok {
		return nil
	}
	if p, ok := c.prepared.Get(raw); ok {
		return p
	}
	var p *preparedRequest
	if req, ok := decodeGraphQLRequest(r.Method, raw[len(r.Method)+1:]); ok {
		if reads := c.reads(req); reads != nil {
			p = &preparedRequest{reads: reads, key: req.key(r.Method)}
		}
	}
	size := int64(len(raw) + 64)
	if p != nil {
		size += int64(len(p.key) + 64*len(p.reads))
	}
	c.prepared.Add(raw, p, size)
	return p
}

// requestBytes returns the method and what carries a GraphQL request: the body of a POST (application/json,
// like gqlgen's POST transport), the URL query of a GET. ok is false for anything else, for websocket upgrades,
// and for requests that cannot be a top query (no "top" in them).
func requestBytes(r *http.Request) (string, bool) {
	if r.Header.Get("Upgrade") != "" {
		return "", false
	}
	switch r.Method {
	case http.MethodPost:
		if !gqlhttp.IsJSONPost(r) || r.Body == nil {
			return "", false // not gqlgen's POST transport's (an event stream is the event-stream transport's)
		}
		body, ok := gqlhttp.WholeBody(r) // read whole before (the server's limitBody): what is left of it, not consumed
		if !ok {
			var err error
			if body, err = io.ReadAll(r.Body); err != nil {
				// Let gqlgen meet the same error (e.g. the body limit) after the same bytes.
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
				return "", false
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if len(body) > 2*maxQuery || !namesTop(body) {
			return "", false
		}
		return r.Method + "\x00" + string(body), true
	case http.MethodGet:
		if mediatype.PrefersEventStream(r.Header) {
			return "", false // an event stream: the server's event-stream transport answers it
		}
		if len(r.URL.RawQuery) > 2*maxQuery || !strings.Contains(r.URL.RawQuery, "top") {
			return "", false
		}
		return r.Method + "\x00" + r.URL.RawQuery, true
	}
	return "", false
}

// namesTop reports whether a JSON request body may hold a field named top: "top" as a whole name, not a part of
// one (topPercent, which rank, aroundMe and friends queries select, made every such request pay a full decode
// here, an eighth of a rank request's server CPU). A name after a JSON escape of a line break or tab ("\ntop")
// counts as whole; a top spelled with \u escapes is missed, and such a request is answered without the cache.
func namesTop(body []byte) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte("top"))
		if j < 0 {
			return false
		}
		at := i + j
		i = at + 3
		if i < len(body) && nameByte(body[i]) {
			continue // topPercent, tops...
		}
		if at == 0 || !nameByte(body[at-1]) {
			return true
		}
		if at >= 2 && body[at-2] == '\\' && (body[at-1] == 'n' || body[at-1] == 't' || body[at-1] == 'r') {
			return true
		}
	}
}

// nameByte reports whether c can be part of a GraphQL name.
func nameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// graphQLRequest is an HTTP GraphQL request as gqlgen's POST and GET transports decode it.
type graphQLRequest struct {
	query, opName string
	vars          map[string]any
}

// decodeGraphQLRequest decodes a POST body or a GET URL query the way gqlgen's transports do. ok is false for
// persisted queries (extensions) and for requests gqlgen would reject.
func decodeGraphQLRequest(method, payload string) (*graphQLRequest, bool) {
	var params *graphql.RawParams
	if method == http.MethodPost {
		var err error
		if params, err = gqlhttp.BodyParams([]byte(payload)); err != nil {
			return nil, false
		}
	} else {
		q, err := url.ParseQuery(payload)
		if err != nil || q.Get("extensions") != "" {
			return nil, false
		}
		params = &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName")}
		if v := q.Get("variables"); v != "" && gqlhttp.JSONDecode(strings.NewReader(v), &params.Variables) != nil {
			return nil, false
		}
	}
	if len(params.Extensions) > 0 || params.Query == "" {
		return nil, false
	}
	return &graphQLRequest{query: params.Query, opName: params.OperationName, vars: params.Variables}, true
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// key is the request part of the response cache key: what selects what gqlgen renders (transport, query,
// operation, variables). Variables are canonical JSON (sorted keys), so equal variables in any order share it.
func (q *graphQLRequest) key(method string) string {
	var vars []byte
	if len(q.vars) > 0 {
		vars, _ = json.Marshal(q.vars)
	}
	var b strings.Builder
	for _, s := range []string{method, q.query, q.opName, string(vars)} {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

// responseKey is the response cache key: the request's key, the Accept header (it decides the Content-Type) and
// the tokens of the lists the request reads.
func (p *preparedRequest) responseKey(accept string, tokens []uint64) string {
	b := make([]byte, 0, len(p.key)+len(accept)+8*len(tokens)+8)
	b = append(b, p.key...)
	b = strconv.AppendInt(b, int64(len(accept)), 10)
	b = append(b, ':')
	b = append(b, accept...)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint64(b, t)
	}
	return string(b)
}

// cleanResponse reports whether a gqlgen response body carries data and nothing else (no errors, no
// extensions), the only kind worth repeating.
func cleanResponse(body []byte) bool {
	var resp struct {
		Errors     json.RawMessage `json:"errors"`
		Data       json.RawMessage `json:"data"`
		Extensions json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(body, &resp) != nil {
		return false
	}
	return resp.Errors == nil && resp.Extensions == nil && len(resp.Data) > 0 && string(resp.Data) != "null"
}

// captureWriter passes a response through and keeps a copy of its body (up to maxResponse bytes).
type captureWriter struct {
	http.ResponseWriter
	status   int
	buf      bytes.Buffer
	overflow bool
}

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if !c.overflow {
		if c.buf.Len()+len(p) > maxResponse {
			c.overflow = true
			c.buf = bytes.Buffer{}
		} else {
			c.buf.Write(p)
		}
	}
	return c.ResponseWriter.Write(p)
}

func (c *captureWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
