package main

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

// Limits of the top response cache: at most about 56 MiB in all. A top-10 response is about 2 KiB, a top-100
// one about 20 KiB, so with long lists the byte bounds hold; the counts bound the bookkeeping.
const (
	topCacheEntries     = 4096     // cached responses at most
	topCacheBytes       = 32 << 20 // bytes of cached responses (and their keys) at most
	topCacheMaxResponse = 1 << 20  // a response larger than this (bytes) is not cached
	topCachePlans       = 1024     // parsed query strings remembered (top-only or not)
	topCachePlanSize    = 8 << 20  // bytes of remembered query strings at most
	topCacheRequests    = 4096     // decoded request bodies remembered
	topCacheRequestSize = 16 << 20 // bytes of remembered request bodies (and their keys) at most
	topCacheMaxQuery    = 16 << 10 // a query string longer than this (bytes) is left to gqlgen uncached
)

// topCache answers repeated HTTP `top` queries with the bytes gqlgen rendered for them before, as long as every
// list they read is still the hub's current cached list (pubsub.Hub.TopToken). Everything else goes to next
// (gqlgen) untouched: other operations, websockets, persisted queries, and any request whose shape it does not
// fully understand. A response is stored only after gqlgen executed that exact request (query, operation name,
// variables, Accept header) successfully while the lists it read did not change, so validation, limits and
// errors stay gqlgen's.
type topCache struct {
	next    http.Handler
	hub     *pubsub.Hub
	readKey bool // a read key is configured: only requests with a valid key may be served (graph.ReadGuard)
	m       *Metrics

	plans     *boundedLRU[*topPlan]         // query string -> its plan (nil plan: not a top-only document)
	prepared  *boundedLRU[*preparedRequest] // method and body (or URL query) -> what it reads (nil: not cacheable)
	responses *boundedLRU[*topResponse]     // request and list tokens -> rendered response
}

// topResponse is a cached rendering of a request.
type topResponse struct {
	contentType string
	body        []byte
}

func newTopCache(next http.Handler, hub *pubsub.Hub, readKey bool, m *Metrics) *topCache {
	return &topCache{next: next, hub: hub, readKey: readKey, m: m,
		plans:     newBoundedLRU[*topPlan](topCachePlans, topCachePlanSize),
		prepared:  newBoundedLRU[*preparedRequest](topCacheRequests, topCacheRequestSize),
		responses: newBoundedLRU[*topResponse](topCacheEntries, topCacheBytes)}
}

func (c *topCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := c.prepare(r)
	if req == nil || (c.readKey && !graph.PrincipalFrom(r.Context()).Has(graph.RoleRead)) {
		c.next.ServeHTTP(w, r) // not a top-only query, or gqlgen's ReadGuard must answer it
		return
	}
	reads := req.reads
	tokens, ok := c.tokens(r.Context(), reads, nil)
	if !ok {
		c.m.topCacheUncached.Inc()
		c.next.ServeHTTP(w, r)
		return
	}
	key := req.responseKey(r.Header.Get("Accept"), tokens)
	if resp, ok := c.responses.get(key); ok {
		w.Header().Set("Content-Type", resp.contentType)
		w.Write(resp.body)
		c.m.topCacheHit(time.Since(start))
		return
	}
	c.m.topCacheMiss.Inc()
	cw := &captureWriter{ResponseWriter: w}
	c.next.ServeHTTP(cw, r)
	if cw.status != http.StatusOK || cw.overflow || !cleanResponse(cw.buf.Bytes()) {
		return
	}
	// Store only if the lists are still the ones read before: a list replaced while gqlgen ran may or may not be
	// in the response, so it must not be filed under either token.
	if _, same := c.tokens(r.Context(), reads, tokens); !same {
		return
	}
	resp := &topResponse{contentType: w.Header().Get("Content-Type"), body: bytes.Clone(cw.buf.Bytes())}
	c.responses.add(key, resp, int64(len(key)+len(resp.body)+len(resp.contentType)+64))
}

// tokens returns the hub's token of every read, or ok false when one of them is not served from memory. With
// want set, ok also requires the tokens to equal want.
func (c *topCache) tokens(ctx context.Context, reads []topRead, want []uint64) ([]uint64, bool) {
	out := make([]uint64, len(reads))
	for i, rd := range reads {
		t, ok := c.hub.TopToken(ctx, rd.view, rd.offset, rd.first)
		if !ok || (want != nil && want[i] != t) {
			return nil, false
		}
		out[i] = t
	}
	return out, true
}

// reads returns the lists a request reads, or nil when it is not a query made only of top fields whose
// arguments this cache understands.
func (c *topCache) reads(req *graphQLRequest) []topRead {
	if len(req.query) > topCacheMaxQuery || !strings.Contains(req.query, "top") {
		return nil
	}
	p, ok := c.plans.get(req.query)
	if !ok {
		p = planTopQuery(req.query)
		c.plans.add(req.query, p, int64(len(req.query)+256))
	}
	if p == nil {
		return nil
	}
	op := p.operation(req.opName)
	if op == nil {
		return nil
	}
	return op.reads(req.vars)
}

// preparedRequest is a decoded top-only request: the lists it reads and the request part of its response key.
type preparedRequest struct {
	reads []topRead
	key   string
}

// prepare returns what a request reads, or nil when the cache leaves it to gqlgen. Requests are decoded once per
// distinct method and body (or URL query) and remembered, so a repeated request costs a map lookup, not JSON
// decoding. It leaves r.Body readable again.
func (c *topCache) prepare(r *http.Request) *preparedRequest {
	raw, ok := requestBytes(r)
	if !ok {
		return nil
	}
	if p, ok := c.prepared.get(raw); ok {
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
	c.prepared.add(raw, p, size)
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
		mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mediaType != "application/json" || r.Body == nil {
			return "", false
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// Let gqlgen meet the same error (e.g. the body limit) after the same bytes.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			return "", false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > 2*topCacheMaxQuery || !bytes.Contains(body, []byte("top")) {
			return "", false
		}
		return r.Method + "\x00" + string(body), true
	case http.MethodGet:
		if len(r.URL.RawQuery) > 2*topCacheMaxQuery || !strings.Contains(r.URL.RawQuery, "top") {
			return "", false
		}
		return r.Method + "\x00" + r.URL.RawQuery, true
	}
	return "", false
}

// graphQLRequest is an HTTP GraphQL request as gqlgen's POST and GET transports decode it.
type graphQLRequest struct {
	query, opName string
	vars          map[string]any
}

// decodeGraphQLRequest decodes a POST body or a GET URL query the way gqlgen's transports do. ok is false for
// persisted queries (extensions) and for requests gqlgen would reject.
func decodeGraphQLRequest(method, payload string) (*graphQLRequest, bool) {
	var params graphql.RawParams
	if method == http.MethodPost {
		if decodeJSON([]byte(payload), &params) != nil {
			return nil, false
		}
	} else {
		q, err := url.ParseQuery(payload)
		if err != nil || q.Get("extensions") != "" {
			return nil, false
		}
		params.Query, params.OperationName = q.Get("query"), q.Get("operationName")
		if v := q.Get("variables"); v != "" && decodeJSON([]byte(v), &params.Variables) != nil {
			return nil, false
		}
	}
	if len(params.Extensions) > 0 || params.Query == "" {
		return nil, false
	}
	return &graphQLRequest{query: params.Query, opName: params.OperationName, vars: params.Variables}, true
}

// decodeJSON decodes like gqlgen's transports: numbers stay json.Number, trailing data is ignored.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
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

// captureWriter passes a response through and keeps a copy of its body (up to topCacheMaxResponse bytes).
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
		if c.buf.Len()+len(p) > topCacheMaxResponse {
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

// topPlan is a parsed document: its operations in order, each with its plan (nil: not a top-only query).
type topPlan struct {
	names []string
	ops   []*topOperation
}

// planTopQuery parses a query string; nil when it does not parse or has no top-only query operation.
func planTopQuery(query string) *topPlan {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil || len(doc.Operations) == 0 {
		return nil
	}
	p := &topPlan{}
	found := false
	for _, op := range doc.Operations {
		tp := planTopOperation(op)
		found = found || tp != nil
		p.names = append(p.names, op.Name)
		p.ops = append(p.ops, tp)
	}
	if !found {
		return nil
	}
	return p
}

// operation picks the executed operation exactly like gqlgen (ast.OperationList.ForName).
func (p *topPlan) operation(name string) *topOperation {
	if name == "" && len(p.ops) == 1 {
		return p.ops[0]
	}
	for i, n := range p.names {
		if n == name {
			return p.ops[i]
		}
	}
	return nil
}

// topOperation is a query whose root selections are all top fields, with where each argument comes from.
type topOperation struct {
	fields   []topArgs
	defaults map[string]*ast.Value // variable -> its default value (nil: none)
}

// topArgs holds a top field's arguments as written (nil: not given).
type topArgs struct{ board, first, offset, window, period *ast.Value }

// topRead is one list a request reads: ranks offset+1 .. offset+first of view.
type topRead struct {
	view          leaderboard.View
	offset, first int
}

func planTopOperation(op *ast.OperationDefinition) *topOperation {
	if op.Operation != ast.Query || len(op.Directives) > 0 || len(op.SelectionSet) == 0 {
		return nil
	}
	t := &topOperation{defaults: map[string]*ast.Value{}}
	for _, vd := range op.VariableDefinitions {
		if len(vd.Directives) > 0 {
			return nil
		}
		t.defaults[vd.Variable] = vd.DefaultValue
	}
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || f.Name != "top" || len(f.Directives) > 0 {
			return nil // fragments at the root, other fields, @skip/@include
		}
		var a topArgs
		for _, arg := range f.Arguments {
			var slot **ast.Value
			switch arg.Name {
			case "board":
				slot = &a.board
			case "first":
				slot = &a.first
			case "offset":
				slot = &a.offset
			case "window":
				slot = &a.window
			case "period":
				slot = &a.period
			default:
				return nil
			}
			if *slot != nil || arg.Value == nil {
				return nil
			}
			*slot = arg.Value
		}
		if a.board == nil {
			return nil
		}
		t.fields = append(t.fields, a)
	}
	return t
}

// reads evaluates the arguments with the request's variables as gqlgen would, with the schema's defaults
// (first 10, offset 0; window and period: the board's). nil when a value is not of the plain kind a valid
// request has (then gqlgen answers, uncached).
func (t *topOperation) reads(vars map[string]any) []topRead {
	out := make([]topRead, 0, len(t.fields))
	for _, f := range t.fields {
		board, ok := t.str(f.board, vars, ast.StringValue)
		if !ok || board == nil {
			return nil
		}
		rd := topRead{view: leaderboard.View{Board: *board}, first: 10}
		if first, ok := t.integer(f.first, vars); !ok {
			return nil
		} else if first != nil {
			rd.first = *first
		}
		if offset, ok := t.integer(f.offset, vars); !ok {
			return nil
		} else if offset != nil {
			rd.offset = *offset
		}
		if window, ok := t.str(f.window, vars, ast.EnumValue); !ok {
			return nil
		} else if window != nil {
			rd.view.Window = leaderboard.Window(*window)
		}
		if period, ok := t.str(f.period, vars, ast.StringValue); !ok {
			return nil
		} else if period != nil {
			rd.view.Period = *period
		}
		out = append(out, rd)
	}
	return out
}

// value resolves an argument: a literal, or a variable's value, or the variable's default. present is false
// when the argument is absent or null (both mean "the default" for top's optional arguments).
func (t *topOperation) value(v *ast.Value, vars map[string]any) (lit *ast.Value, js any, present bool) {
	if v == nil {
		return nil, nil, false
	}
	if v.Kind != ast.Variable {
		return v, nil, v.Kind != ast.NullValue
	}
	if x, ok := vars[v.Raw]; ok {
		return nil, x, x != nil
	}
	if d := t.defaults[v.Raw]; d != nil {
		return t.value(d, nil)
	}
	return nil, nil, false
}

// str resolves a string-valued argument written as kind (StringValue for ID and String, EnumValue for enums).
func (t *topOperation) str(v *ast.Value, vars map[string]any, kind ast.ValueKind) (*string, bool) {
	lit, js, present := t.value(v, vars)
	switch {
	case !present:
		return nil, true
	case lit != nil:
		if lit.Kind != kind {
			return nil, false
		}
		return &lit.Raw, true
	}
	s, ok := js.(string)
	return &s, ok
}

// integer resolves an Int argument (32-bit; anything else is left to gqlgen).
func (t *topOperation) integer(v *ast.Value, vars map[string]any) (*int, bool) {
	lit, js, present := t.value(v, vars)
	var raw string
	switch {
	case !present:
		return nil, true
	case lit != nil:
		if lit.Kind != ast.IntValue {
			return nil, false
		}
		raw = lit.Raw
	default:
		n, ok := js.(json.Number)
		if !ok {
			return nil, false
		}
		raw = string(n)
	}
	n, err := strconv.ParseInt(raw, 10, 32)
	if err != nil {
		return nil, false
	}
	i := int(n)
	return &i, true
}

// boundedLRU is a mutex-guarded least-recently-used map bounded by entry count and by total size (in the unit the
// caller gives add).
type boundedLRU[V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxSize    int64
	size       int64
	order      *list.List // front: most recently used; values *boundedLRUItem[V]
	items      map[string]*list.Element
}

type boundedLRUItem[V any] struct {
	key  string
	val  V
	size int64
}

func newBoundedLRU[V any](maxEntries int, maxSize int64) *boundedLRU[V] {
	return &boundedLRU[V]{maxEntries: maxEntries, maxSize: maxSize, order: list.New(), items: map[string]*list.Element{}}
}

func (c *boundedLRU[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*boundedLRUItem[V]).val, true
	}
	var zero V
	return zero, false
}

// add stores key (replacing an older value) and evicts the least recently used entries beyond the bounds. A
// value larger than the whole size bound is not stored.
func (c *boundedLRU[V]) add(key string, val V, size int64) {
	if size > c.maxSize {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		it := e.Value.(*boundedLRUItem[V])
		c.size += size - it.size
		it.val, it.size = val, size
		c.order.MoveToFront(e)
	} else {
		c.items[key] = c.order.PushFront(&boundedLRUItem[V]{key: key, val: val, size: size})
		c.size += size
	}
	for len(c.items) > c.maxEntries || c.size > c.maxSize {
		e := c.order.Back()
		it := e.Value.(*boundedLRUItem[V])
		c.order.Remove(e)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

// stats returns the number of entries and their total size.
func (c *boundedLRU[V]) stats() (entries int, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}
