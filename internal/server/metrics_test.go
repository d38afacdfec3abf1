package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
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
