package server

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "auth"})

	mutations := map[string]string{
		"submit": `mutation { submitScore(input: {board: "auth", playerId: "p", score: 1}) { updated } }`,
		"bulk":   `mutation { submitScores(inputs: [{board: "auth", playerId: "p", score: 1}]) { updated } }`,
		"create": `mutation { createLeaderboard(input: {id: "auth"}) { id } }`,
		"remove": `mutation { removePlayer(board: "auth", playerId: "p") }`,
	}
	read := `{ top(board: "auth") { playerId } }`
	// want[key][operation] is the expected code ("" for success).
	want := map[string]map[string]string{
		"":            {"submit": "UNAUTHENTICATED", "bulk": "UNAUTHENTICATED", "create": "UNAUTHENTICATED", "remove": "UNAUTHENTICATED", "read": "UNAUTHENTICATED"},
		"wrong":       {"submit": "UNAUTHENTICATED", "bulk": "UNAUTHENTICATED", "create": "UNAUTHENTICATED", "remove": "UNAUTHENTICATED", "read": "UNAUTHENTICATED"},
		testReadKey:   {"submit": "FORBIDDEN", "bulk": "FORBIDDEN", "create": "FORBIDDEN", "remove": "FORBIDDEN", "read": ""},
		testSubmitKey: {"submit": "", "bulk": "", "create": "FORBIDDEN", "remove": "FORBIDDEN", "read": ""},
		testAdminKey:  {"submit": "", "bulk": "", "create": "", "remove": "", "read": ""},
	}
	for key, ops := range want {
		for op, code := range ops {
			q := mutations[op]
			if op == "read" {
				q = read
			}
			r := s.do(t, key, q, nil)
			got := ""
			if len(r.Errors) > 0 {
				got = r.Errors[0].Code()
			}
			if got != code {
				t.Errorf("key %q, %s: want %q, got %q (%+v)", key, op, code, got, r.Errors)
			}
		}
	}
	// Introspection is behind the read key too; a header without the Bearer scheme is no key.
	s.wantCode(t, "", "UNAUTHENTICATED", `{ __schema { queryType { name } } }`, nil)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", strings.NewReader(`{"query":"{ leaderboards { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", testAdminKey)
	if r := doRequest(t, req); len(r.Errors) != 1 || r.Errors[0].Code() != "UNAUTHENTICATED" {
		t.Errorf("key without Bearer: %+v", r)
	}
}

// TestGeneratedAdminKey: without API_KEYS the server makes an admin key and prints it once on its console, where
// the operator can copy it; it never appears in the logs (not even at debug level, with requests that use it).
func TestGeneratedAdminKey(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys = ""
	logs := &syncBuffer{}
	s := startServerLog(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	key := s.App.GeneratedKey
	if len(key) < 20 {
		t.Fatalf("generated key %q", key)
	}
	s.wantCode(t, "", "UNAUTHENTICATED", `mutation { createLeaderboard(input: {id: "g"}) { id } }`, nil)
	s.must(t, key, `mutation { createLeaderboard(input: {id: "g"}) { id } }`, nil, nil)
	s.must(t, "", `{ top(board: "g") { rank } }`, nil, nil) // reads stay public

	printed := s.Console.String()
	if n := strings.Count(printed, key); n != 1 {
		t.Fatalf("the console shows the generated key %d times, want once:\n%s", n, printed)
	}
	if !strings.Contains(printed, "Authorization: Bearer "+key+"\n") {
		t.Fatalf("the console does not show the key as a ready-to-use header:\n%s", printed)
	}
	if strings.Contains(logs.String(), key) {
		t.Fatalf("the generated key is in the logs:\n%s", logs)
	}
	// A server with API_KEYS prints no key.
	if out := startServer(t, testConfig(t)).Console.String(); out != "" {
		t.Fatalf("API_KEYS set, yet the console shows %q", out)
	}
}
