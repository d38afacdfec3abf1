package server

import (
	"context"
	"strings"
	"testing"
	"time"

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
