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

	"github.com/leaderboard/leaderboard/internal/server"
)

func main() {
	cfg, err := server.LoadConfig(os.Args[1:], os.Getenv)
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
	if err := run(ctx, cfg, log); err != nil {
		log.Error("server failed", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx is done (SIGINT/SIGTERM), then shuts down gracefully.
func run(ctx context.Context, cfg server.Config, log *slog.Logger) error {
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

func newLogger(cfg server.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
