// Package server is the leaderboard's HTTP service: New wires Redis (or the embedded store), the store, the live
// hub, the GraphQL handler (gqlgen with the server's limits and transports) and the routes; Serve answers until
// its context ends and shuts down gracefully. The files: app (wiring), routes, serve (listener, timeouts,
// shutdown), config (LoadConfig), middleware (body limits, error coding, logging), httpget (GraphQL over GET),
// connlimit (MAX_CONNS), metrics, auth (API keys), redisopts (Redis clients), embedded (miniredis for `make run`),
// querycache (bounded gqlgen caches). The websocket and event-stream transports are package gqlstream's; the
// period-close events and their webhooks package periodclose's.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/alicebob/miniredis/v2"
	"github.com/leaderboard/leaderboard/demo"
	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/periodclose"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/ledger"
	"github.com/leaderboard/leaderboard/pubsub"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// App is the wired server: Redis, the store, the live hub, the GraphQL handler and the HTTP routes.
type App struct {
	cfg      Config
	log      *slog.Logger
	rdb      redis.UniversalClient
	probe    redis.UniversalClient // /readyz's own small pool, so a busy main pool never looks like a Redis outage
	embedded *miniredis.Miniredis  // nil unless no Redis is configured
	ledger   *ledger.Ledger        // nil unless DATABASE_URL is set
	Store    *leaderboard.Store
	Hub      *pubsub.Hub
	Keys     *Keyring
	proxies  proxies // who may name the client address, and where (TRUSTED_PROXIES, CLIENT_ADDR_HEADER)
	// GeneratedKey is the admin key made at start when API_KEYS is empty ("" otherwise).
	GeneratedKey string
	Metrics      *Metrics
	streams      *gqlstream.Streams // the websocket and event-stream transports, their guard and their shutdown
	exports      *exports           // GET /export/: EXPORT_CONCURRENCY slots and their Redis client (export.go)
	gql          *handler.Server
	schema       *ast.Schema
	tracing      *sdktrace.TracerProvider // nil: tracing off
	fast         *graph.FastPath          // nil: tracing on, or no prepared results (tests)
	limits       *graph.ComplexityLimit   // complexity, fields and answer bytes of a request (a batch's together)
	presentPanic func(r *http.Request, p any) *gqlerror.Error

	hubCtx    context.Context
	hubCancel context.CancelFunc
	hubDone   chan struct{}
	// closesDone is closed when the close checker and the webhook deliveries (package periodclose), which run
	// until hubCtx ends, have stopped.
	closesDone <-chan struct{}
}

// New connects to Redis (or starts the embedded one) and builds the handlers. console receives the one-time
// generated admin key.
func New(cfg Config, log *slog.Logger, console io.Writer) (*App, error) {
	keys, err := ParseAPIKeys(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	px, err := parseProxies(cfg.TrustedProxies, cfg.ClientAddrHeader, cfg.IPv6Prefix)
	if err != nil {
		return nil, err
	}
	if errs := cfg.Closes.Check(); len(errs) > 0 {
		return nil, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	a := &App{cfg: cfg, log: log, Keys: keys, proxies: px}
	if keys.Empty() {
		a.GeneratedKey = keys.GenerateAdminKey()
		fmt.Fprintf(console, "\n  API_KEYS is empty: generated an admin key for this run (it is not shown again):\n\n"+
			"      Authorization: Bearer %s\n\n", a.GeneratedKey)
	}

	publish := leaderboard.PublishSharded
	embeddedAddr := ""
	if cfg.Embedded() {
		mr, pub, err := embeddedRedis(log)
		if err != nil {
			return nil, fmt.Errorf("starting the embedded Redis: %w", err)
		}
		a.embedded, publish, embeddedAddr = mr, pub, mr.Addr()
	}
	opts, err := redisOptions(cfg, embeddedAddr)
	if err != nil {
		return nil, err
	}
	// The pool has a connection for every read and write the API may have in flight, and room for the live
	// hub's reads and subscriptions, the demo and the metrics hook. /readyz pings on two connections of its own.
	timeout := redisTimeout
	if a.embedded != nil {
		timeout = embeddedTimeout
	}
	a.rdb = newRedisClient(opts, cfg.MaxConcurrentReads+cfg.MaxConcurrentWrites+16, timeout)
	a.probe = newRedisClient(opts, 2, readyTimeout)
	if a.tracing, err = startTracing(context.Background(), cfg, log); err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if a.tracing != nil {
		if err := traceRedis(a.rdb, a.tracing); err != nil {
			return nil, fmt.Errorf("tracing Redis: %w", err)
		}
	}
	var rec leaderboard.Ledger
	if cfg.DatabaseURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		a.ledger, err = ledger.Open(ctx, ledger.Config{URL: cfg.DatabaseURL})
		cancel()
		if err != nil {
			a.rdb.Close()
			a.probe.Close()
			return nil, err
		}
		rec = a.ledger
		log.Info("ledger on: every write is recorded in PostgreSQL before Redis applies it")
	}
	// Every store that may freeze a closed period's standings records a delivery per webhook (README "Durability").
	groups := periodclose.Groups(cfg.Closes.URLs)
	onRestore := func(r leaderboard.RestoreReport) {
		if r.ResendErr != nil {
			log.Warn("restore from the ledger: sending undelivered close events again (the next ledger check "+
				"tries again)", "board", r.Board, "err", r.ResendErr)
		}
		if r.Err != nil {
			log.Warn("restore from the ledger", "board", r.Board, "events", r.Events, "catch_up", r.CatchUp,
				"took", r.Took, "err", r.Err)
			return
		}
		log.Info("restored from the ledger", "board", r.Board, "events", r.Events, "catch_up", r.CatchUp,
			"took", r.Took, "applying", r.Applying, "resting", r.Resting, "close_events_resent", r.Resent)
	}
	// storeConfig is what every store of the process shares: keys, clock and the ledger, with its restores'
	// pace and the webhooks whose deliveries it records. workers: the ledger's sequencer workers (0: default).
	storeConfig := func(workers int) leaderboard.Config {
		return leaderboard.Config{Prefix: cfg.KeyPrefix, PublishCommand: publish, Clock: cfg.Clock, Ledger: rec,
			LedgerWorkers: workers, OnRestore: onRestore, OutboxGroups: groups,
			RestoreShare: cfg.LedgerRestoreShare, RestoreRate: restoreRate(cfg.LedgerRestoreRate)}
	}
	mainCfg := storeConfig(0)
	mainCfg.MaxReads, mainCfg.MaxWrites, mainCfg.BatchLanes = cfg.MaxConcurrentReads, cfg.MaxConcurrentWrites,
		cfg.RedisPipelineLanes
	a.Store = leaderboard.New(a.rdb, mainCfg)
	// The hub reads through a store of its own, without those bounds: its reads are few (coalesced per board)
	// and live screens must not wait behind a flood of queries. It writes nothing, but knows the ledger: a board
	// being restored is UNAVAILABLE to it, not gone.
	hubStore := leaderboard.New(a.rdb, storeConfig(1))
	a.Hub = pubsub.New(hubStore, pubsub.Config{Logger: log, CallerStore: a.Store})

	resolver := &graph.Resolver{Store: a.Store, Hub: a.Hub, Log: log, ReadKeyRequired: keys.ReadKeyRequired,
		GeneratedOnly: cfg.generatedOnly,
		Closes:        pubsub.NewCloseFeed(hubStore, a.Hub, cfg.Closes.PollInterval, log)}
	schema := graph.NewSchema(resolver)
	a.schema = schema.Schema()
	a.Metrics = NewMetrics(schema.Schema())
	resolver.OnSubscription = a.Metrics.OnSubscription
	a.Metrics.WatchHub(a.Hub, a.rdb)
	a.Metrics.WatchStores(a.Store, hubStore)
	a.rdb.AddHook(redisHook{a.Metrics, log})
	a.streams = gqlstream.New(gqlstream.Config{
		CORSOrigins:     cfg.CORSOrigins,
		PublicOrigins:   cfg.PublicOrigins,
		PingInterval:    cfg.WSPingInterval,
		ProtocolPings:   cfg.WSProtocolPings,
		MaxOpsPerConn:   cfg.MaxSubscriptionsPerConn,
		MaxConnsPerAddr: cfg.MaxConnsPerAddr,
		MaxMessageBytes: cfg.MaxWSMessageBytes,
		ClientAddr:      px.limitAddr,
		NetConn:         requestConn,
		Init:            a.websocketInit,
		OnError: func(ctx context.Context, err error) {
			log.Debug("websocket error", "err", err)
		},
		Log:     log,
		Metrics: a.Metrics.transports(),
	})
	a.Metrics.WatchStreams(a.streams)
	a.exports = newExports(opts, exportsConfig{Max: cfg.ExportConcurrency,
		// The exports' store knows the ledger, as the hub's does: an export of a closed period Redis no longer
		// holds pages its frozen standings, and a board being restored is UNAVAILABLE, not an empty period.
		Store:    storeConfig(1),
		Resolver: a.Store, ReadKeyRequired: keys.ReadKeyRequired, ClientAddr: px.clientAddr, Streams: a.streams,
		Log: log, WriteTimeout: cfg.WriteTimeout, RequestTimeout: cfg.RequestTimeout})
	a.exports.rdb.AddHook(redisHook{a.Metrics, log})
	a.gql = a.graphQLHandler(schema)

	a.hubCtx, a.hubCancel = context.WithCancel(context.Background())
	a.hubDone = make(chan struct{})
	go func() {
		defer close(a.hubDone)
		if err := a.Hub.Run(a.hubCtx); err != nil {
			log.Error("live updates stopped", "err", err)
		}
	}()
	a.closesDone = periodclose.Start(a.hubCtx, hubStore, cfg.Closes, log, a.Metrics.closes())
	if a.ledger != nil {
		go a.checkLedger(a.hubCtx)
	}
	return a, nil
}

// checkLedger compares the ledger's boards with Redis every LEDGER_CHECK_INTERVAL (and once at start): lost
// boards are restored, lagging ones caught up.
func (a *App) checkLedger(ctx context.Context) {
	t := time.NewTicker(a.cfg.LedgerCheckInterval)
	defer t.Stop()
	for {
		if n, err := a.Store.CheckLedger(ctx); err != nil {
			a.log.Warn("ledger check", "err", err)
		} else if n > 0 {
			a.log.Info("ledger check: restoring boards Redis lost or lags behind on", "boards", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *App) graphQLHandler(schema graphql.ExecutableSchema) *handler.Server {
	srv := handler.New(schema)
	srv.AddTransport(a.streams.Websocket())
	srv.AddTransport(transport.Options{})
	srv.AddTransport(a.streams.EventStream()) // before GET and POST
	srv.AddTransport(getTransport{})          // a mutation is a 405 (httpget.go)
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(newDocCache(a.cfg.QueryCacheSize, a.cfg.QueryCacheBytes))
	if a.tracing != nil {
		srv.Use(graphQLTracing{a.tracing.Tracer(tracerName)})
	}
	if a.cfg.MaxQueryTokens > 0 {
		srv.SetParserTokenLimit(a.cfg.MaxQueryTokens)
	}
	if a.cfg.Introspection {
		srv.Use(extension.Introspection{})
	}
	complexity := &graph.ComplexityLimit{Max: a.cfg.MaxQueryComplexity, MaxFields: a.cfg.MaxQueryFields,
		MaxResponseBytes: a.cfg.MaxResponseBytes}
	a.limits = complexity
	metrics := graphQLExtension{a.Metrics}
	readGuard := graph.ReadGuard(a.Keys.ReadKeyRequired)
	presenter, recoverFunc := graph.ErrorPresenter(a.log), graph.Recover(a.log)
	srv.Use(extension.AutomaticPersistedQuery{Cache: newAPQCache(a.cfg.APQCacheSize, a.cfg.QueryCacheBytes)})
	srv.Use(complexity) // the innermost response interceptor: the answer bound acts before metrics count it
	srv.Use(graph.DepthLimit{Max: a.cfg.MaxQueryDepth})
	srv.Use(graph.ExactFloats{})
	srv.Use(graph.TextCheck{})
	srv.Use(metrics)
	srv.AroundRootFields(readGuard)
	srv.SetErrorPresenter(presenter)
	srv.SetRecoverFunc(recoverFunc)
	if a.tracing == nil {
		// The same executor configuration, for the requests the fast path runs (graph.FastPath): the limit that
		// reads variables, the root field and response middleware, the presenter and the recover function. With
		// tracing on, every operation goes through gqlgen (the tracer is an operation interceptor).
		a.fast = graph.NewFastPath(schema, graph.FastPathConfig{
			Limits:         []graphql.OperationContextMutator{complexity},
			RootMiddleware: readGuard,
			Response:       []graphql.ResponseInterceptor{metrics, complexity},
			ErrorPresenter: presenter,
			Recover:        recoverFunc,
			Introspection:  a.cfg.Introspection,
		})
		a.presentPanic = func(r *http.Request, p any) *gqlerror.Error {
			return presenter(r.Context(), recoverFunc(r.Context(), p))
		}
	}
	a.Metrics.WatchFastPath(a.fast)
	return srv
}

// websocketInit authenticates a websocket connection from its connection_init payload ({"authorization":
// "Bearer <key>"}), falling back to the upgrade request's Authorization header. An unknown key, or no key where
// a read key is required, closes the connection with 4403.
func (a *App) websocketInit(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	p := graph.PrincipalFrom(ctx)
	if auth, ok := initPayloadAuthorization(payload); ok {
		p = a.Keys.Lookup(auth)
	}
	reject := func(msg string) (context.Context, *transport.InitPayload, error) {
		ctx = gqlstream.WithCloseCode(ctx, 4403, "UNAUTHENTICATED: "+msg)
		return ctx, nil, errors.New("UNAUTHENTICATED: " + msg)
	}
	if p.Presented && p.Roles == 0 {
		return reject("unknown API key")
	}
	if a.Keys.ReadKeyRequired && !p.Has(graph.RoleRead) {
		return reject("an API key is required")
	}
	ctx = graph.WithPrincipal(ctx, p)
	ctx = graph.WithConn(ctx, graph.NewConn(a.cfg.MaxSubscriptionsPerConn))
	return ctx, nil, nil
}

func (a *App) stopHub() {
	a.hubCancel()
	select {
	case <-a.hubDone:
	case <-time.After(2 * time.Second):
		a.log.Warn("live updates did not stop within 2s")
	}
	select {
	case <-a.closesDone:
	case <-time.After(2 * time.Second):
		a.log.Warn("close events and webhooks did not stop within 2s")
	}
}

// runDemo starts the demo boards' simulator (DEMO_RATE, DEMO_PLAYERS, DEMO_SEED tune it) and returns a
// function that stops it and waits for it.
func (a *App) runDemo(ctx context.Context) (stop func()) {
	dcfg := a.cfg.DemoSettings
	dcfg.Logger = a.log
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := demo.Run(ctx, a.Store, dcfg); err != nil {
			a.log.Error("demo stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// Close stops the hub and closes Redis (and the embedded Redis). Safe after Serve.
func (a *App) Close() {
	a.stopHub()
	drain, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	a.Store.Drain(drain) // calls whose callers left (the demo when it stops) end before Redis closes under them
	cancel()
	if a.ledger != nil {
		a.ledger.Close()
	}
	a.rdb.Close()
	a.probe.Close()
	a.exports.rdb.Close()
	if a.embedded != nil {
		a.embedded.Close()
	}
	if a.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // the last spans go out
		defer cancel()
		if err := a.tracing.Shutdown(ctx); err != nil {
			a.log.Warn("tracing shutdown", "err", err)
		}
	}
}

// restoreRate is LEDGER_RESTORE_RATE as leaderboard.Config.RestoreRate takes it: 0 (no limit) is negative there.
func restoreRate(perSecond float64) float64 {
	if perSecond == 0 {
		return -1
	}
	return perSecond
}
