package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/periodclose"
	"github.com/leaderboard/leaderboard/internal/topcache"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/ast"
)

// liveHeapMetrics adds go_gc_heap_live_bytes (what the last collection left) and go_gc_heap_goal_bytes to the Go
// runtime's metrics: with GC_HEAP_FLOOR the heap in use (go_memstats_heap_inuse_bytes) holds up to the floor of
// garbage between collections, so the live heap is what shows a leak.
var liveHeapMetrics = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/(live|goal):bytes$`)}

// Metrics are the server's Prometheus metrics, on a registry of their own (served at /metrics). Every label
// value comes from a fixed set (schema field names, error codes), never from clients, so series stay bounded.
type Metrics struct {
	reg          *prometheus.Registry
	operations   *prometheus.CounterVec   // lb_graphql_operations_total{type,field,outcome}
	opDuration   *prometheus.HistogramVec // lb_graphql_operation_duration_seconds{type,field}
	httpDur      *prometheus.HistogramVec // lb_http_request_duration_seconds{route}
	redisErrors  *prometheus.CounterVec   // lb_redis_errors_total{kind}
	wsConns      prometheus.Gauge         // lb_websocket_connections
	wsRejected   *prometheus.CounterVec   // lb_websocket_rejected_total{reason}
	subs         *prometheus.GaugeVec     // lb_subscriptions{field}
	connsRefused prometheus.Counter       // lb_connections_refused_total (MAX_CONNS)

	// Period-close events and their webhooks (package periodclose).
	closesRecorded    prometheus.Counter     // lb_close_events_recorded_total
	webhookDeliveries *prometheus.CounterVec // lb_webhook_deliveries_total{result}: delivered, failed (an attempt), gave_up

	// The top response cache (topcache.go): lb_top_cache_requests_total{result}. A hit bypasses gqlgen, so it
	// is also counted in lb_graphql_operations_total and its duration histogram, as gqlgen would have.
	topCacheHits, topCacheMiss, topCacheUncached prometheus.Counter
	topQueryOK                                   prometheus.Counter
	topQueryDuration                             prometheus.Observer

	rootFields map[string]bool // known root field names
}

// outcomes are the label values of outcome: "ok" and the error codes.
var outcomes = func() map[string]bool {
	m := map[string]bool{"ok": true}
	for _, c := range graph.Codes {
		m[string(c)] = true
	}
	return m
}()

func NewMetrics(schema *ast.Schema) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lb_graphql_operations_total",
			Help: "GraphQL responses by operation type, root field and outcome (ok or the first error's code)."},
			[]string{"type", "field", "outcome"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lb_graphql_operation_duration_seconds",
			Help:    "Time to answer a GraphQL query or mutation, by root field.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{"type", "field"}),
		httpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lb_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route (websocket connections excluded).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{"route"}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lb_redis_errors_total",
			Help: "Redis failures: dial (cannot connect) and command (a command failed other than by a miss or a rejected input)."},
			[]string{"kind"}),
		wsConns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lb_websocket_connections",
			Help: "Open websocket connections."}),
		wsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lb_websocket_rejected_total",
			Help: "Websocket upgrades refused, by reason (origin, per_address_limit)."}, []string{"reason"}),
		subs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lb_subscriptions",
			Help: "Running GraphQL subscriptions, by field."}, []string{"field"}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "lb_connections_refused_total",
			Help: "Connections closed at once because MAX_CONNS were open and none was idle."}),
		rootFields: map[string]bool{"__schema": true, "__type": true, "__typename": true},
	}
	for _, def := range []*ast.Definition{schema.Query, schema.Mutation, schema.Subscription} {
		if def != nil {
			for _, f := range def.Fields {
				m.rootFields[f.Name] = true
			}
		}
	}
	m.reg.MustRegister(m.operations, m.opDuration, m.httpDur, m.redisErrors, m.wsConns, m.wsRejected, m.subs,
		m.connsRefused,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(liveHeapMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"origin", "per_address_limit"} {
		m.wsRejected.WithLabelValues(r)
	}
	topCache := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lb_top_cache_requests_total",
		Help: "HTTP top-only queries by response cache result: hit (served from the cache), miss (executed, then " +
			"cached if it succeeded), uncached (a list it reads was not in the live cache, or had a change pending)."},
		[]string{"result"})
	m.reg.MustRegister(topCache)
	m.topCacheHits = topCache.WithLabelValues("hit")
	m.topCacheMiss = topCache.WithLabelValues("miss")
	m.topCacheUncached = topCache.WithLabelValues("uncached")
	m.topQueryOK = m.operations.WithLabelValues(string(ast.Query), "top", "ok")
	m.topQueryDuration = m.opDuration.WithLabelValues(string(ast.Query), "top")
	m.closesRecorded = prometheus.NewCounter(prometheus.CounterOpts{Name: "lb_close_events_recorded_total",
		Help: "Period-close events this process recorded in an outbox."})
	m.webhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lb_webhook_deliveries_total",
		Help: "Webhook delivery outcomes: delivered (2xx), failed (one attempt that failed), gave_up (dead-lettered after WEBHOOK_RETRY_FOR)."},
		[]string{"result"})
	for _, r := range []string{"delivered", "failed", "gave_up"} {
		m.webhookDeliveries.WithLabelValues(r)
	}
	m.reg.MustRegister(m.closesRecorded, m.webhookDeliveries)
	m.redisErrors.WithLabelValues("dial")
	m.redisErrors.WithLabelValues("command")
	// The paths that spare gqlgen's generic code, process-wide: what share of the work takes them.
	for _, c := range []struct {
		name, help string
		f          func() int64
	}{
		{"lb_graphql_prepared_operations_total", "Operations whose results the server's own encoder wrote (submitScore, " +
			"submitScores, rank, aroundMe, friends with plain-field selections), not gqlgen's generated marshalers.",
			graph.PreparedOperations},
		{"lb_live_shared_renders_total", "topUpdates payloads rendered once for every subscriber that gets the same " +
			"update with the same selection.", graph.SharedRenders},
		{"lb_websocket_streamed_responses_total", "Subscription responses after the first that connections wrote " +
			"themselves (batched per connection), not through gqlgen's per-operation goroutine.", gqlstream.StreamedFrames},
		{"lb_websocket_slow_writes_total", "Stream writes a peer did not take at once, finished by a goroutine of " +
			"its connection (slow consumers).", gqlstream.SlowHandoffs},
	} {
		f := c.f
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(f()) }))
	}
	b := Build()
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lb_build_info",
		Help: "Always 1; the labels say which build this is."}, []string{"version", "revision", "go"})
	m.reg.MustRegister(buildInfo)
	buildInfo.WithLabelValues(b.Version, b.Revision, b.Go).Set(1)
	return m
}

// WatchStores exports what the stores' plain reads (leaderboard.Store.PlainStats) have done, together.
func (m *Metrics) WatchStores(stores ...*leaderboard.Store) {
	counter := func(name, help string, labels prometheus.Labels, f func(leaderboard.PlainStats) int64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 {
				var n int64
				for _, s := range stores {
					n += f(s.PlainStats())
				}
				return float64(n)
			}))
	}
	const reads = "Reads answered with plain Redis commands instead of a Lua script (which blocks Redis while it " +
		"runs): rank and friends reads, and aroundMe reads by player."
	counter("lb_plain_reads_total", reads, prometheus.Labels{"read": "rank"},
		func(p leaderboard.PlainStats) int64 { return p.Reads - p.Arounds })
	counter("lb_plain_reads_total", reads, prometheus.Labels{"read": "around"},
		func(p leaderboard.PlainStats) int64 { return p.Arounds })
	counter("lb_plain_read_retries_total", "Plain reads whose snapshot was taken again because a write landed "+
		"between their round trips.", nil, func(p leaderboard.PlainStats) int64 { return p.Retries })
}

// WatchStreams exports what the websocket and event-stream transports hold now (gqlstream.Streams.Stats).
func (m *Metrics) WatchStreams(s *gqlstream.Streams) {
	gauge := func(name, help string, f func(gqlstream.Stats) int) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(s.Stats())) }))
	}
	gauge("lb_event_streams", "Open event streams (server-sent events) and exports: the long-lived responses "+
		"besides websockets.",
		func(st gqlstream.Stats) int { return st.Streams })
	gauge("lb_stream_client_addresses", "Client addresses holding websockets or event streams (each counted "+
		"against MAX_CONNS_PER_ADDR).", func(st gqlstream.Stats) int { return st.Addrs })
	gauge("lb_websocket_operations", "Operations running on graphql-transport-ws connections (each counted against "+
		"MAX_SUBSCRIPTIONS_PER_CONN).", func(st gqlstream.Stats) int { return st.OpsInFlight })
}

// WatchFastPath exports how many operations f ran (nil: none, with tracing on).
func (m *Metrics) WatchFastPath(f *graph.FastPath) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lb_graphql_fast_path_operations_total",
		Help: "Operations that took the fast path (POSTs of documents gqlgen ran on the prepared path before)."},
		func() float64 { return float64(f.Operations()) }))
}

// WatchHub exports the live hub's fan-out counts (pubsub.Hub.Stats) and the Redis client's pool statistics.
func (m *Metrics) WatchHub(h *pubsub.Hub, rdb redis.UniversalClient) {
	counter := func(name, help string, f func(pubsub.Stats) uint64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(h.Stats())) }))
	}
	counter("lb_live_snapshots_total", "topUpdates messages sent as a whole list (first, rollover, far behind).",
		func(s pubsub.Stats) uint64 { return s.Snapshots })
	counter("lb_live_diffs_total", "topUpdates messages sent as diffs.", func(s pubsub.Stats) uint64 { return s.Diffs })
	counter("lb_live_rank_updates_total", "rankUpdates messages sent.",
		func(s pubsub.Stats) uint64 { return s.RankUpdates })
	counter("lb_live_replaced_total", "Unread updates taken back from subscribers that fell behind and replaced "+
		"by one merged update.", func(s pubsub.Stats) uint64 { return s.Replaced })
	counter("lb_live_stuck_dropped_total", "Subscribers dropped for reading nothing for 30 s (pubsub.Config.StuckAfter).",
		func(s pubsub.Stats) uint64 { return s.StuckDropped })
	counter("lb_live_list_rows_read_total", "Entries the live hub read from Redis for top lists (each as deep as its "+
		"subscriptions show, 100 when the top query cache serves it).", func(s pubsub.Stats) uint64 { return s.ListRows })
	counter("lb_live_rank_reads_total", "Watched players' entries the live hub read from Redis (their own changes, "+
		"first reads, boards with exactTop).", func(s pubsub.Stats) uint64 { return s.RankReads })
	counter("lb_live_rank_derived_total", "Watched players' entries the live hub brought up to date from the change "+
		"events alone (another player's move).", func(s pubsub.Stats) uint64 { return s.RankDerived })

	pool := func(name, help string, gauge bool, f func(*redis.PoolStats) uint32) {
		v := func() float64 { return float64(f(rdb.PoolStats())) }
		if gauge {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
		} else {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, v))
		}
	}
	pool("lb_redis_pool_connections", "Connections in the Redis pool (all nodes).", true,
		func(p *redis.PoolStats) uint32 { return p.TotalConns })
	pool("lb_redis_pool_idle_connections", "Idle connections in the Redis pool.", true,
		func(p *redis.PoolStats) uint32 { return p.IdleConns })
	pool("lb_redis_pool_hits_total", "Connections taken from the pool without dialing.", false,
		func(p *redis.PoolStats) uint32 { return p.Hits })
	pool("lb_redis_pool_misses_total", "Connections the pool had to dial.", false,
		func(p *redis.PoolStats) uint32 { return p.Misses })
	pool("lb_redis_pool_timeouts_total", "Waits for a pool connection that timed out.", false,
		func(p *redis.PoolStats) uint32 { return p.Timeouts })
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// OnSubscription counts running subscriptions (graph.Resolver.OnSubscription).
func (m *Metrics) OnSubscription(field string, delta int) {
	m.subs.WithLabelValues(field).Add(float64(delta))
}

// TopCacheStats returns the top response cache's counters (topcache.Stats).
func (m *Metrics) TopCacheStats() topcache.Stats { return topCacheStats{m} }

type topCacheStats struct{ m *Metrics }

// Hit counts a top query answered from the response cache, as a cache hit and as the successful top query gqlgen
// would have counted.
func (s topCacheStats) Hit(d time.Duration) {
	s.m.topCacheHits.Inc()
	s.m.topQueryOK.Inc()
	s.m.topQueryDuration.Observe(d.Seconds())
}

func (s topCacheStats) Miss()     { s.m.topCacheMiss.Inc() }
func (s topCacheStats) Uncached() { s.m.topCacheUncached.Inc() }

// timeRoute measures the requests of one route.
func (m *Metrics) timeRoute(route string, next http.Handler) http.Handler {
	h := m.httpDur.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || gqlstream.IsEventStream(r) {
			next.ServeHTTP(w, r) // a websocket or an event stream lives for hours; the gauges tell more
			return
		}
		start := time.Now()
		next.ServeHTTP(w, r)
		h.Observe(time.Since(start).Seconds())
	})
}

// graphQLExtension counts every GraphQL response by operation and outcome, and times queries and mutations.
type graphQLExtension struct{ m *Metrics }

var (
	_ graphql.HandlerExtension    = graphQLExtension{}
	_ graphql.ResponseInterceptor = graphQLExtension{}
)

func (graphQLExtension) ExtensionName() string                   { return "Metrics" }
func (graphQLExtension) Validate(graphql.ExecutableSchema) error { return nil }

func (e graphQLExtension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	start := time.Now()
	resp := next(ctx)
	typ, field := "none", "none" // a request that did not get as far as a valid operation
	if graphql.HasOperationContext(ctx) {
		if op := graphql.GetOperationContext(ctx).Operation; op != nil {
			typ = string(op.Operation)
			field = "other"
			if len(op.SelectionSet) > 0 {
				if f, ok := op.SelectionSet[0].(*ast.Field); ok && e.m.rootFields[f.Name] {
					field = f.Name
				}
			}
		}
	}
	e.m.countOperation(typ, field, resp)
	if typ != string(ast.Subscription) {
		e.m.opDuration.WithLabelValues(typ, field).Observe(time.Since(start).Seconds())
	}
	return resp
}

// transports are the collectors the websocket and event-stream transports count in.
func (m *Metrics) transports() gqlstream.Metrics {
	return gqlstream.Metrics{Conns: m.wsConns, Rejected: m.wsRejected, Operations: m.operations,
		CountOperation: m.countOperation}
}

// closes returns the collectors of the period-close events and their webhooks.
func (m *Metrics) closes() periodclose.Metrics {
	return periodclose.Metrics{Recorded: m.closesRecorded, Deliveries: m.webhookDeliveries}
}

// countOperation counts one response (nil: the end of a subscription) of an operation of type typ on root field
// field in lb_operations_total, by the code of its first error ("ok" without one).
func (m *Metrics) countOperation(typ, field string, resp *graphql.Response) {
	outcome := "ok"
	if resp != nil && len(resp.Errors) > 0 {
		outcome = codeInternal
		if code, _ := resp.Errors[0].Extensions["code"].(string); outcomes[code] {
			outcome = code
		}
	}
	m.operations.WithLabelValues(typ, field, outcome).Inc()
}

// redisHook counts Redis failures. A miss (redis.Nil), a script's own rejection of bad input ("LB_...") and a
// missing function or script (the store then loads it and calls again) are normal answers, not failures.
type redisHook struct {
	m   *Metrics
	log *slog.Logger
}

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.m.redisErrors.WithLabelValues("dial").Inc()
		}
		return c, err
	}
}

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.count(err) {
			h.log.Warn("redis command failed", "cmd", cmd.Name(), "err", err)
		}
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.count(err) {
			h.log.Warn("redis pipeline failed", "commands", len(cmds), "err", err)
		}
		return err
	}
}

// count counts err if it is a failure and reports whether it did.
func (h redisHook) count(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	if leaderboard.IsScriptError(err) || leaderboard.ScriptMissing(err) {
		return false // a script's refusal of bad input, or the store loading its scripts
	}
	h.m.redisErrors.WithLabelValues("command").Inc()
	return true
}
