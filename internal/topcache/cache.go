// Package topcache answers repeated HTTP `top` queries from rendered bytes while the live hub's cached lists they
// read are unchanged (pubsub.Hub.TopToken). It decodes requests the way gqlgen's POST and GET transports do
// (request.go, with the request decoder it shares with the fast path: internal/gqlhttp), plans which lists a
// top-only document reads (plan.go), and keeps responses in an LRU bounded by count and bytes (internal/lru). Its
// counts go to a Stats (the server's metrics).
package topcache

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/lru"
	"github.com/leaderboard/leaderboard/pubsub"
	"github.com/vektah/gqlparser/v2/ast"
)

// Limits of the top response cache: at most about 56 MiB in all. A top-10 response is about 2 KiB, a top-100
// one about 20 KiB, so with long lists the byte bounds hold; the counts bound the bookkeeping.
const (
	maxEntries      = 4096     // cached responses at most
	maxBytes        = 32 << 20 // bytes of cached responses (and their keys) at most
	maxResponse     = 1 << 20  // a response larger than this (bytes) is not cached
	maxPlans        = 1024     // parsed query strings remembered (top-only or not)
	maxPlanBytes    = 8 << 20  // bytes of remembered query strings at most
	maxRequests     = 4096     // decoded request bodies remembered
	maxRequestBytes = 16 << 20 // bytes of remembered request bodies (and their keys) at most
	maxQuery        = 16 << 10 // a query string longer than this (bytes) is left to gqlgen uncached
)

// Stats receives what the cache did with each request it looked at.
type Stats interface {
	Hit(d time.Duration) // served from the cache in d
	Miss()               // executed by gqlgen (and stored if clean)
	Uncached()           // a list it reads was not in the hub's cache, or had a change pending
}

// Cache answers repeated HTTP `top` queries with the bytes gqlgen rendered for them before, as long as every
// list they read is still the hub's current cached list (pubsub.Hub.TopToken). Everything else goes to next
// (gqlgen) untouched: other operations, websockets, persisted queries, and any request whose shape it does not
// fully understand. A response is stored only after gqlgen executed that exact request (query, operation name,
// variables, Accept header) successfully while the lists it read did not change, so validation, limits and
// errors stay gqlgen's.
type Cache struct {
	next    http.Handler
	hub     *pubsub.Hub
	readKey bool // a read key is configured: only requests with a valid key may be served (graph.ReadGuard)
	stats   Stats
	first   int // top's default `first`, from the schema

	plans     *lru.LRU[*topPlan]         // query string -> its plan (nil plan: not a top-only document)
	prepared  *lru.LRU[*preparedRequest] // method and body (or URL query) -> what it reads (nil: not cacheable)
	responses *lru.LRU[*topResponse]     // request and list tokens -> rendered response
}

// topResponse is a cached rendering of a request.
type topResponse struct {
	contentType string
	body        []byte
	cost        graph.Cost // what gqlgen's run of it took of the limits: a batch is charged it (graph.Budget)
}

// New returns a cache in front of next (gqlgen's handler) over the hub's cached lists. readKey: a read key is
// configured, so only requests whose principal may read are served from the cache. schema gives top's default
// `first`.
func New(next http.Handler, hub *pubsub.Hub, readKey bool, stats Stats, schema *ast.Schema) *Cache {
	return &Cache{next: next, hub: hub, readKey: readKey, stats: stats, first: defaultFirst(schema),
		plans:     lru.New[*topPlan](maxPlans, maxPlanBytes),
		prepared:  lru.New[*preparedRequest](maxRequests, maxRequestBytes),
		responses: lru.New[*topResponse](maxEntries, maxBytes)}
}

func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := c.prepare(r)
	if req == nil || (c.readKey && !graph.PrincipalFrom(r.Context()).Has(graph.RoleRead)) {
		c.next.ServeHTTP(w, r) // not a top-only query, or gqlgen's ReadGuard must answer it
		return
	}
	reads := req.reads
	tokens, ok := c.tokens(r.Context(), reads, nil)
	if !ok {
		c.stats.Uncached()
		c.next.ServeHTTP(w, r)
		return
	}
	key := req.responseKey(r.Header.Get("Accept"), tokens)
	if resp, ok := c.responses.Get(key); ok && graph.Charge(r.Context(), resp.cost) {
		w.Header().Set("Content-Type", resp.contentType)
		w.Write(resp.body)
		c.stats.Hit(time.Since(start))
		return
	}
	// Not cached, or a batch's budget has no room left for it: gqlgen runs it (and refuses it, as it would
	// without the cache).
	c.stats.Miss()
	ctx, meter := graph.WithMeter(r.Context())
	cw := &captureWriter{ResponseWriter: w}
	c.next.ServeHTTP(cw, r.WithContext(ctx))
	cost, measured := meter.Cost()
	if cw.status != http.StatusOK || cw.overflow || !measured || !cleanResponse(cw.buf.Bytes()) {
		return
	}
	// Store only if the lists are still the ones read before: a list replaced while gqlgen ran may or may not be
	// in the response, so it must not be filed under either token.
	if _, same := c.tokens(r.Context(), reads, tokens); !same {
		return
	}
	resp := &topResponse{contentType: w.Header().Get("Content-Type"), body: bytes.Clone(cw.buf.Bytes()), cost: cost}
	c.responses.Add(key, resp, int64(len(key)+len(resp.body)+len(resp.contentType)+64))
}

// tokens returns the hub's token of every read, or ok false when one of them is not served from memory. With
// want set, ok also requires the tokens to equal want.
func (c *Cache) tokens(ctx context.Context, reads []topRead, want []uint64) ([]uint64, bool) {
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
func (c *Cache) reads(req *graphQLRequest) []topRead {
	if len(req.query) > maxQuery || !strings.Contains(req.query, "top") {
		return nil
	}
	p, ok := c.plans.Get(req.query)
	if !ok {
		p = planTopQuery(req.query, c.first)
		c.plans.Add(req.query, p, int64(len(req.query)+256))
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
