package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve answers on ln until ctx is done, then shuts down: it stops accepting, closes websockets (with a
// going-away frame), lets in-flight requests finish within SHUTDOWN_TIMEOUT, and stops the live hub.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	a.streams.Listening(ln.Addr())
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
	srv.RegisterOnShutdown(a.streams.CloseAll)
	srv.RegisterOnShutdown(limit.closeUnused) // the listener is closed by then: no new ones come
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
	a.streams.CloseAll() // a connection upgraded while Shutdown ran
	a.stopHub()
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
