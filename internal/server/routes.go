package server

import (
	"context"
	"io"
	"net/http"

	"github.com/leaderboard/leaderboard/internal/fastpath"
	"github.com/leaderboard/leaderboard/internal/topcache"
	"github.com/leaderboard/leaderboard/web"
	"github.com/leaderboard/leaderboard/web/graphiql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/cors"
)

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
	return logRequests(a.log, a.proxies.clientAddr, h)
}

// routes is the server's URL space. "/" is reserved for the live dashboard (package web).
func (a *App) routes() *http.ServeMux {
	mux := http.NewServeMux()
	var requests http.Handler = a.gql
	if a.fast != nil {
		requests = fastpath.New(a.fast, a.presentPanic, requests) // documents gqlgen ran on the prepared path skip its plumbing
	}
	requests = topcache.New(requests, a.Hub, a.Keys.ReadKeyRequired, a.Metrics.TopCacheStats(), a.schema) // repeated top queries skip gqlgen
	gql := upgradesTo(a.gql, requests)
	gql = a.withTimeout(gql)
	gql = a.streams.Guard(gql)
	gql = a.Keys.middleware(gql)
	gql = codeErrors(gql)
	// Each operation of a batch goes through all of the above, under one budget of the request limits.
	gql = batches(a.cfg.MaxBatch, a.cfg.RequestTimeout, a.limits.NewBudget, gql)
	gql = limitBody(a.cfg.MaxBodyBytes, gql)
	mux.Handle("/graphql", a.Metrics.timeRoute("graphql", gql))
	mux.Handle("/export/", a.Metrics.timeRoute("export", a.Keys.middleware(a.exports)))
	// GraphiQL from the binary's own assets; the dashboard links it with operations in the URL (?query=...).
	gi := graphiql.Handler()
	mux.Handle("/graphiql", gi)
	mux.Handle("/graphiql/", gi)
	mux.Handle("/", web.Handler())
	mux.HandleFunc("/websocket-origin", a.streams.CheckOrigin) // the dashboard asks why its websocket never opens
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/readyz", a.Metrics.timeRoute("readyz", http.HandlerFunc(a.ready)))
	if a.cfg.MetricsAddr == "" {
		mux.Handle("/metrics", a.Metrics.Handler())
	}
	return mux
}

// upgradesTo sends websocket upgrades straight to ws and everything else to next. The response cache and the fast
// path have nothing for an upgrade, and every frame between the handler and the upgrade stays on the stack of the
// connection's goroutine while the websocket is open: with theirs, an idle connection's stack outgrew 4 KiB
// (TestIdleConnectionStack).
func upgradesTo(ws, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			ws.ServeHTTP(w, r)
			return
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
