// Command leaderboard is the leaderboard service: a GraphQL API (queries, mutations, websocket subscriptions)
// over Redis, with GraphiQL, health checks and Prometheus metrics. See README.md for configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/cors"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/demo"
	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/topcache"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
	"github.com/leaderboard/leaderboard/web"
)

func main() {
	cfg, err := LoadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, os.Stderr); err != nil {
		log.Error("server failed", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx is done (SIGINT/SIGTERM), then shuts down gracefully.
func run(ctx context.Context, cfg Config, log *slog.Logger, console io.Writer) error {
	app, err := NewApp(cfg, log, console)
	if err != nil {
		return err
	}
	defer app.Close()
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return err
	}
	return app.Serve(ctx, ln)
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// App is the wired server: Redis, the store, the live hub, the GraphQL handler and the HTTP routes.
type App struct {
	cfg      Config
	log      *slog.Logger
	rdb      redis.UniversalClient
	probe    redis.UniversalClient // /readyz's own small pool, so a busy main pool never looks like a Redis outage
	embedded *miniredis.Miniredis  // nil unless no Redis is configured
	Store    *leaderboard.Store
	Hub      *pubsub.Hub
	Keys     *Keyring
	// GeneratedKey is the admin key made at start when API_KEYS is empty ("" otherwise).
	GeneratedKey string
	Metrics      *Metrics
	ws           *websockets
	gql          *handler.Server
	schema       *ast.Schema

	hubCtx    context.Context
	hubCancel context.CancelFunc
	hubDone   chan struct{}
}

// NewApp connects to Redis (or starts the embedded one) and builds the handlers. console receives the one-time
// generated admin key.
func NewApp(cfg Config, log *slog.Logger, console io.Writer) (*App, error) {
	keys, err := ParseAPIKeys(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, Keys: keys}
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
	a.rdb = newRedisClient(opts, cfg.MaxConcurrentReads+cfg.MaxConcurrentWrites+16, redisTimeout)
	a.probe = newRedisClient(opts, 2, readyTimeout)
	a.Store = leaderboard.New(a.rdb, leaderboard.Config{Prefix: cfg.KeyPrefix, PublishCommand: publish,
		MaxReads: cfg.MaxConcurrentReads, MaxWrites: cfg.MaxConcurrentWrites})
	// The hub reads through a store of its own, without those bounds: its reads are few (coalesced per board)
	// and live screens must not wait behind a flood of queries.
	hubStore := leaderboard.New(a.rdb, leaderboard.Config{Prefix: cfg.KeyPrefix, PublishCommand: publish})
	a.Hub = pubsub.New(hubStore, pubsub.Config{Logger: log, CallerStore: a.Store})

	resolver := &graph.Resolver{Store: a.Store, Hub: a.Hub, Log: log}
	schema := graph.NewSchema(resolver)
	a.schema = schema.Schema()
	a.Metrics = NewMetrics(schema.Schema())
	resolver.OnSubscription = a.Metrics.OnSubscription
	a.rdb.AddHook(redisHook{a.Metrics, log})
	a.ws = newWebsockets(newOriginPolicy(cfg.CORSOrigins, cfg.PublicOrigins), cfg.WSPingInterval, wsInitTimeout,
		cfg.MaxSubscriptionsPerConn, a.Metrics)
	a.gql = a.graphQLHandler(schema)

	a.hubCtx, a.hubCancel = context.WithCancel(context.Background())
	a.hubDone = make(chan struct{})
	go func() {
		defer close(a.hubDone)
		if err := a.Hub.Run(a.hubCtx); err != nil {
			log.Error("live updates stopped", "err", err)
		}
	}()
	return a, nil
}

func (a *App) graphQLHandler(schema graphql.ExecutableSchema) *handler.Server {
	srv := handler.New(schema)
	srv.AddTransport(transport.Websocket{
		Implementation:        a.ws,
		InitFunc:              a.websocketInit,
		InitTimeout:           2 * wsInitTimeout,    // a backstop: a.ws closes first (4408; 1002 on graphql-ws)
		KeepAlivePingInterval: a.cfg.WSPingInterval, // graphql-ws: "ka" messages
		PingPongInterval:      a.cfg.WSPingInterval, // graphql-transport-ws: ping, and drop peers that miss the pong
		PayloadReadLimit:      &a.cfg.MaxWSMessageBytes,
		ErrorFunc: func(ctx context.Context, err error) {
			a.log.Debug("websocket error", "err", err)
		},
	})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(newDocCache(a.cfg.QueryCacheSize, a.cfg.QueryCacheBytes))
	if a.cfg.MaxQueryTokens > 0 {
		srv.SetParserTokenLimit(a.cfg.MaxQueryTokens)
	}
	if a.cfg.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: newAPQCache(a.cfg.APQCacheSize, a.cfg.QueryCacheBytes)})
	srv.Use(&graph.ComplexityLimit{Max: a.cfg.MaxQueryComplexity, MaxFields: a.cfg.MaxQueryFields})
	srv.Use(graph.DepthLimit{Max: a.cfg.MaxQueryDepth})
	srv.Use(graph.FloatLiterals{})
	srv.Use(graph.TextCheck{})
	srv.Use(graphQLExtension{a.Metrics})
	srv.AroundRootFields(graph.ReadGuard(a.Keys.ReadKeyRequired))
	srv.SetErrorPresenter(graph.ErrorPresenter(a.log))
	srv.SetRecoverFunc(graph.Recover(a.log))
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
		ctx = transport.WithWebsocketCloseCode(ctx, 4403)
		ctx = transport.AppendCloseReason(ctx, "UNAUTHENTICATED: "+msg)
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

// Handler returns the server's routes with logging, panic recovery and CORS. Without CORS_ORIGINS no
// cross-origin browser request is allowed (rs/cors would read an empty list as "allow all").
func (a *App) Handler() http.Handler {
	h := http.Handler(a.routes())
	if len(a.cfg.CORSOrigins) > 0 {
		h = cors.New(cors.Options{
			AllowedOrigins: a.cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodOptions},
			AllowedHeaders: []string{"Authorization", "Content-Type"},
			MaxAge:         600,
		}).Handler(h)
	}
	return logRequests(a.log, h)
}

// routes is the server's URL space. "/" is reserved for the live dashboard (package web).
func (a *App) routes() *http.ServeMux {
	mux := http.NewServeMux()
	var gql http.Handler = a.gql
	gql = topcache.New(gql, a.Hub, a.Keys.ReadKeyRequired, a.Metrics.TopCacheStats(), a.schema) // repeated top queries skip gqlgen
	gql = a.withTimeout(gql)
	gql = a.ws.guard(a.cfg.MaxConnsPerAddr, gql)
	gql = a.Keys.middleware(gql)
	gql = limitBody(a.cfg.MaxBodyBytes, gql)
	gql = codeErrors(gql)
	mux.Handle("/graphql", a.Metrics.timeRoute("graphql", gql))
	// The dashboard links GraphiQL with example operations in the URL (?query=...&variables=...).
	mux.Handle("/graphiql", playground.Handler("leaderboard GraphiQL", "/graphql",
		playground.WithGraphiqlPersistStateInURL(true)))
	mux.Handle("/", web.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/readyz", a.Metrics.timeRoute("readyz", http.HandlerFunc(a.ready)))
	if a.cfg.MetricsAddr == "" {
		mux.Handle("/metrics", a.Metrics.Handler())
	}
	return mux
}

// withTimeout bounds HTTP GraphQL requests by REQUEST_TIMEOUT (not websockets, which live long).
func (a *App) withTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" && a.cfg.RequestTimeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), a.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// ready answers 200 when Redis answers a PING within a second, 503 otherwise. It pings through its own two
// connections: a saturated main pool is load, not an outage.
func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var err error
	if cc, ok := a.probe.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
	} else {
		err = a.probe.Ping(ctx).Err()
	}
	if err != nil {
		a.log.Warn("not ready: Redis unreachable", "err", err)
		http.Error(w, "redis unreachable\n", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

// Serve answers on ln until ctx is done, then shuts down: it stops accepting, closes websockets (with a
// going-away frame), lets in-flight requests finish within SHUTDOWN_TIMEOUT, and stops the live hub.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	a.ws.origins.listening(ln.Addr())
	limit := newConnLimit(ln, a.cfg.MaxConns, func() { a.Metrics.connsRefused.Inc() })
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: min(10*time.Second, a.cfg.ReadTimeout),
		ReadTimeout:       a.cfg.ReadTimeout,  // slow bodies; websockets clear it after the upgrade
		WriteTimeout:      a.cfg.WriteTimeout, // slow readers of answers; likewise
		IdleTimeout:       a.cfg.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
		ConnState:         limit.connState,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(a.ws.closeAll)
	a.log.Info("listening", "addr", ln.Addr().String(), "graphql", "/graphql", "graphiql", "/graphiql",
		"embedded_redis", a.embedded != nil)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(limit) }()
	if a.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			srv.Close()
			return fmt.Errorf("METRICS_ADDR: %w", err)
		}
		msrv := &http.Server{Handler: a.Metrics.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
		a.log.Info("metrics listening", "addr", mln.Addr().String())
		go func() { errc <- msrv.Serve(mln) }()
		defer msrv.Close()
	}
	if a.cfg.Demo {
		defer a.runDemo(ctx)() // stops the simulator before Serve returns (and before Close closes Redis)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	limit.interruptUploads() // uploads still arriving end now; requests already read run to their end
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		a.log.Warn("requests still running at the shutdown deadline; closing them")
		err = srv.Close()
	}
	a.ws.closeAll() // a connection upgraded while Shutdown ran
	a.stopHub()
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (a *App) stopHub() {
	a.hubCancel()
	select {
	case <-a.hubDone:
	case <-time.After(2 * time.Second):
		a.log.Warn("live updates did not stop within 2s")
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
	a.rdb.Close()
	a.probe.Close()
	if a.embedded != nil {
		a.embedded.Close()
	}
}
