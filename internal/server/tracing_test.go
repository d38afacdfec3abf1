package server

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// With tracing on, every operation is a span whose Redis commands are its children, with no variables, keys or
// Redis arguments anywhere in the trace; a subscription is one span however many events it sends; Redis calls
// outside operations (the hub's refreshes) make no traces. Without an exporter tracing is off.
func TestTracing(t *testing.T) {
	t.Parallel()
	if off := startServer(t, testConfig(t)); off.App.tracing != nil {
		t.Fatal("tracing is on without OTEL_EXPORTER_OTLP_ENDPOINT or an exporter")
	}
	exp := tracetest.NewInMemoryExporter()
	cfg := testConfig(t)
	cfg.TraceExporter = exp
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "traced"})
	const secret = "player-secret-7f3a"
	s.submit(t, map[string]any{"board": "traced", "playerId": secret, "score": 5})
	s.do(t, "", `query Mine($p: ID!) { rank(board: "traced", playerId: $p) { rank } }`, map[string]any{"p": secret})
	s.wantCode(t, "", "NOT_FOUND", `query Missing { top(board: "nope") { rank } }`, nil)

	ctx := ctxT(t, 20*time.Second)
	c := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	c.Subscribe("1", `subscription Live { topUpdates(board: "traced") { version } }`, nil)
	for i := range 3 {
		if i > 0 {
			s.submit(t, map[string]any{"board": "traced", "playerId": "p" + string(rune('a'+i)), "score": 10 + i})
		}
		if _, err := c.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := s.App.tracing.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) > 0 {
		name, ok := spans[0].Resource.Set().Value("service.name")
		if !ok || name.AsString() != "leaderboard" {
			t.Errorf("service.name %q, want leaderboard", name.AsString())
		}
	}
	byName := map[string]int{}
	ops := map[string]string{} // trace id -> operation span name
	for _, sp := range spans {
		byName[sp.Name]++
		if strings.HasPrefix(sp.Name, "graphql ") {
			ops[sp.SpanContext.TraceID().String()] = sp.Name
		}
		for _, a := range sp.Attributes {
			v := a.Value.String()
			if strings.Contains(v, secret) || strings.Contains(v, cfg.KeyPrefix) || strings.Contains(v, testSubmitKey) {
				t.Errorf("span %s records %s=%s", sp.Name, a.Key, v)
			}
		}
	}
	if byName["graphql subscription Live"] != 1 {
		t.Errorf("subscription spans: %d, want 1 (spans %v)", byName["graphql subscription Live"], byName)
	}
	if byName["graphql query Mine"] != 1 || byName["graphql query Missing"] != 1 || byName["graphql mutation"] < 3 {
		t.Errorf("operation spans %v", byName)
	}
	redisSpans := 0
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "graphql ") {
			if sp.Name == "graphql query Missing" && (sp.Status.Description != "NOT_FOUND") {
				t.Errorf("failed operation's status %+v", sp.Status)
			}
			continue
		}
		redisSpans++
		if op, ok := ops[sp.SpanContext.TraceID().String()]; !ok || !sp.Parent.IsValid() {
			t.Errorf("Redis span %s outside an operation (parent %v)", sp.Name, sp.Parent)
		} else if sp.Name == "fcall" && op == "graphql subscription Live" {
			t.Errorf("a subscription event made a Redis span in the subscription's trace")
		}
	}
	t.Logf("spans: %v", byName)
	if redisSpans == 0 {
		t.Errorf("no Redis spans: %v", byName)
	}
}

// failingExporter refuses every batch of spans, as an exporter whose collector is down does.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector unreachable (test)")
}

func (failingExporter) Shutdown(context.Context) error { return nil }

// An export that fails is logged by the server's structured logger (level WARN), not written by OpenTelemetry's
// default handler to the standard log package. Not parallel: it sets the batch delay of the environment and reads
// the standard logger, both process-wide.
func TestTracingExportErrorsAreLogged(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // ms: the batch goes out (and fails) at once
	var std syncBuffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)
	var logged syncBuffer
	cfg := testConfig(t)
	cfg.TraceExporter = failingExporter{}
	s := startServerLog(t, cfg, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	s.do(t, "", `{ leaderboards { id } }`, nil) // a span to export
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logged.String(), "collector unreachable (test)") {
		if time.Now().After(deadline) {
			t.Fatalf("no export error in the server's log after 20 s; the standard logger got %q", std.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logged.String(), "level=WARN") {
		t.Errorf("the export error is not a warning: %q", logged.String())
	}
	if strings.Contains(std.String(), "collector unreachable") {
		t.Errorf("the export error also went to the standard logger: %q", std.String())
	}
}
