package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

func TestMetricsAndPersistedQueries(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "m"})
	s.wantCode(t, "", "NOT_FOUND", `{ top(board: "nope") { rank } }`, nil)

	// Automatic persisted queries: the hash alone is unknown first, then works once the query was sent with it.
	query := `{ top(board: "m") { rank } }`
	sum := sha256.Sum256([]byte(query))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
	body, _ := json.Marshal(map[string]any{"extensions": ext})
	if r := s.post(t, "", body); len(r.Errors) != 1 || r.Errors[0].Code() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("unknown hash: %+v", r)
	}
	body, _ = json.Marshal(map[string]any{"query": query, "extensions": ext})
	if r := s.post(t, "", body); len(r.Errors) != 0 {
		t.Fatalf("query with hash: %+v", r)
	}
	body, _ = json.Marshal(map[string]any{"extensions": ext})
	if r := s.post(t, "", body); len(r.Errors) != 0 || string(r.Data) != `{"top":[]}` {
		t.Fatalf("hash alone: %+v %s", r, r.Data)
	}

	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`lb_graphql_operations_total{field="createLeaderboard",outcome="ok",type="mutation"} 1`,
		`lb_graphql_operations_total{field="top",outcome="NOT_FOUND",type="query"} 1`,
		`lb_graphql_operation_duration_seconds_count{field="top",type="query"}`,
		`lb_http_request_duration_seconds_count{route="graphql"}`,
		`lb_redis_errors_total{kind="command"} 0`,
		`lb_websocket_connections 0`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The fan-out's health and the Redis pool are on /metrics: a subscriber that got a snapshot and a diff shows in
// the live counters, and the pool that served the requests has connections and hits.
func TestLiveAndPoolMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "lm"})
	ctx := ctxT(t, 20*time.Second)
	c := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	c.Subscribe("1", `subscription { topUpdates(board: "lm") { version snapshot } }`, nil)
	var first, second struct{ TopUpdates struct{ Snapshot bool } }
	c.NextData(t, ctx, "1", &first)
	s.submit(t, map[string]any{"board": "lm", "playerId": "p", "score": 1})
	c.NextData(t, ctx, "1", &second)
	if !first.TopUpdates.Snapshot || second.TopUpdates.Snapshot {
		t.Fatalf("updates %+v %+v, want a snapshot then a diff", first, second)
	}
	metric := func(text, name string) float64 {
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatalf("/metrics lacks %s", name)
		return 0
	}
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(data)
	for name, min := range map[string]float64{"lb_live_snapshots_total": 1, "lb_live_diffs_total": 1,
		"lb_redis_pool_connections": 1, "lb_redis_pool_hits_total": 1, "lb_live_list_rows_read_total": 1} {
		if got := metric(text, name); got < min {
			t.Errorf("%s %v, want at least %v", name, got, min)
		}
	}
	for _, name := range []string{"lb_live_stuck_dropped_total", "lb_live_rank_updates_total",
		"lb_live_rank_reads_total", "lb_live_rank_derived_total", "lb_redis_pool_timeouts_total"} {
		if got := metric(text, name); got != 0 {
			t.Errorf("%s %v, want 0", name, got)
		}
	}
	metric(text, "lb_live_replaced_total")
	metric(text, "lb_redis_pool_idle_connections")
	metric(text, "lb_redis_pool_misses_total")
}
