package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// /metrics carries lb_build_info with this binary's version, revision and Go release; -version asks for them.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	b := Build()
	if b.Version == "" || b.Revision == "" || b.Go != runtime.Version() {
		t.Fatalf("build info %+v", b)
	}
	s := startServer(t, testConfig(t))
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := fmt.Sprintf(`lb_build_info{go=%q,revision=%q,version=%q} 1`, b.Go, b.Revision, b.Version)
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("/metrics lacks %s", want)
	}
	cfg, err := LoadConfig([]string{"-version"}, func(string) string { return "" })
	if err != nil || !cfg.ShowVersion {
		t.Errorf("-version: %+v %v", cfg.ShowVersion, err)
	}
	if got := b.String(); !strings.Contains(got, b.Version) || !strings.Contains(got, b.Revision) {
		t.Errorf("version line %q", got)
	}
}

// `leaderboard healthcheck` succeeds against a live server (an unspecified LISTEN_ADDR host means this machine)
// and fails against a closed port or a server that answers anything but 200.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t, testConfig(t))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	for _, addr := range []string{":" + port, "0.0.0.0:" + port, "127.0.0.1:" + port} {
		for _, ready := range []bool{false, true} {
			var out bytes.Buffer
			if err := Healthcheck(ctx, addr, ready, &out); err != nil || !strings.Contains(out.String(), "ok") {
				t.Errorf("healthcheck %s (ready %v): %v %q", addr, ready, err, out.String())
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := Healthcheck(ctx, closed, false, io.Discard); err == nil {
		t.Errorf("healthcheck of the closed port %s succeeded", closed)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "redis unreachable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	defer down.Close()
	addr := strings.TrimPrefix(down.URL, "http://")
	if err := Healthcheck(ctx, addr, false, io.Discard); err != nil {
		t.Errorf("healthz of a server whose Redis is down: %v", err)
	}
	if err := Healthcheck(ctx, addr, true, io.Discard); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("readyz of a server whose Redis is down: %v", err)
	}
	if err := Healthcheck(ctx, "no-port", false, io.Discard); err == nil {
		t.Error("a LISTEN_ADDR without a port was accepted")
	}
}

// /metrics counts the server's own paths: a rank query takes the plain read and the prepared path, and its
// second run the fast path.
func TestPathMetrics(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "paths"})
	s.submit(t, map[string]any{"board": "paths", "playerId": "p", "score": 1.0})
	names := []string{"lb_graphql_prepared_operations_total", "lb_graphql_fast_path_operations_total",
		"lb_plain_reads_total", "lb_plain_read_retries_total", "lb_live_shared_renders_total",
		"lb_websocket_streamed_responses_total", "lb_websocket_slow_writes_total", "lb_event_streams",
		"lb_stream_client_addresses", "lb_websocket_operations"}
	before := map[string]float64{}
	for _, n := range names {
		before[n] = metricSum(t, s, n)
	}
	rankBefore := metricSum(t, s, "lb_plain_reads_total", `read="rank"`)
	for range 2 {
		s.must(t, "", `query($b: ID!) { rank(board: $b, playerId: "p") { rank score } }`, map[string]any{"b": "paths"}, nil)
	}
	for _, n := range names[:3] {
		if d := metricSum(t, s, n) - before[n]; d < 1 {
			t.Errorf("%s grew by %v", n, d)
		}
	}
	if d := metricSum(t, s, "lb_plain_reads_total", `read="rank"`) - rankBefore; d < 2 {
		t.Errorf(`lb_plain_reads_total{read="rank"} grew by %v, want 2`, d)
	}
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, n := range names {
		if !strings.Contains(string(body), "\n"+n) {
			t.Errorf("/metrics lacks %s", n)
		}
	}
}
