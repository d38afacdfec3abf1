// Command leaderboard is the leaderboard service: a GraphQL API (queries, mutations, websocket subscriptions)
// over Redis, with GraphiQL, health checks and Prometheus metrics. See README.md for configuration; the service
// itself is package internal/server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // board time zones resolve on hosts and images without a zoneinfo database (the scratch image)

	"github.com/leaderboard/leaderboard/internal/heapfloor"
	"github.com/leaderboard/leaderboard/internal/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:]))
	}
	cfg, err := server.LoadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.ShowVersion {
		fmt.Println(server.Build())
		return
	}
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("server failed", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx is done (SIGINT/SIGTERM), then shuts down gracefully.
func run(ctx context.Context, cfg server.Config, log *slog.Logger) error {
	defer heapfloor.Start(uint64(cfg.GCHeapFloor)).Stop()
	app, err := server.New(cfg, log, os.Stderr) // a generated admin key is printed to stderr
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

// healthcheck is `leaderboard healthcheck [-ready] [-listen ADDR]`: exit status 0 when the server listening on ADDR
// (default: LISTEN_ADDR, as the server's own -listen) answers /healthz (with -ready: /readyz, which needs Redis)
// with 200, 1 otherwise.
func healthcheck(args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	ready := fs.Bool("ready", false, "ask /readyz (Redis reachable) instead of /healthz (the process answers)")
	listen := fs.String("listen", "", "the address the server listens on (default LISTEN_ADDR, else :8080)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := server.LoadConfig(nil, os.Getenv) // LISTEN_ADDR and its default
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	addr := cfg.ListenAddr
	if *listen != "" {
		addr = *listen
	}
	if err := server.Healthcheck(context.Background(), addr, *ready, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		return 1
	}
	return 0
}

func newLogger(cfg server.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
