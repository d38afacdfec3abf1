package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// TestRedisDown: with Redis stopped, requests answer UNAVAILABLE and /readyz fails; when it is back, the server
// recovers by itself.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + rs.Addr
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "down"})
	s.submit(t, map[string]any{"board": "down", "playerId": "a", "score": 1})

	rs.Stop()
	s.wantCode(t, "", "UNAVAILABLE", `{ top(board: "down") { rank } }`, nil)
	s.wantCode(t, testSubmitKey, "UNAVAILABLE", `mutation { submitScore(input: {board: "down", playerId: "b", score: 2}) { updated } }`, nil)
	if code := getStatus(t, s.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down: %d", code)
	}
	if code := getStatus(t, s.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with Redis down: %d", code)
	}

	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	// The data is gone (the test server keeps nothing on disk), but the server works again.
	deadline := time.Now().Add(10 * time.Second)
	for getStatus(t, s.URL+"/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not recover")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.create(t, map[string]any{"id": "down"})
	s.submit(t, map[string]any{"board": "down", "playerId": "a", "score": 1})
	if got := ids(s.top(t, "down", 10)); got != "a:1" {
		t.Fatalf("after recovery: %s", got)
	}
}

// FuzzGraphQL feeds arbitrary documents and variables to the handler: no panic, no 5xx, and every error has a
// code. Run longer with: go test -run '^$' -fuzz FuzzGraphQL -fuzztime 30s .
func FuzzGraphQL(f *testing.F) {
	for _, seed := range []struct{ query, vars string }{
		{`{ leaderboards { id title order } }`, `{}`},
		{`query($b: ID!) { top(board: $b, first: 3) { playerId rank } }`, `{"b": "fz"}`},
		{`mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`, `{"in": {"board": "fz", "playerId": "p", "score": 1e308, "metadata": {"a": [1]}}}`},
		{`mutation { submitScores(inputs: [{board: "fz", playerId: "", score: -0}]) { duplicate } }`, `null`},
		{`{ friends(board: "fz", playerId: "p", friendIds: ["a", "b"]) { rank } aroundMe(board: "fz", playerId: "p", radius: -1) { rank } }`, `{}`},
		{`{ rank(board: "fz", playerId: "p", window: DAILY, period: "2026-W99") { rank } }`, `[]`},
		{`fragment F on Query { ...F } { ...F }`, `{}`},
		{`{ __schema { types { name fields { name } } } }`, `{"x": "\u0000"}`},
		{`subscription { topUpdates(board: "fz") { version } }`, `{}`},
		{`{ top(board: "fz", first: 2147483648) { rank } }`, `{}`},
		{"{ leaderboard(id: \"\xff\") { id } }", `{}`},
	} {
		f.Add(seed.query, seed.vars)
	}
	// One server for the whole fuzz run; requests go straight to the handler.
	cfg := testConfig(f)
	cfg.APIKeys = "admin:" + testAdminKey
	app, err := New(cfg, testLogger(f), bytesDiscard{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(app.Close)
	h := app.Handler()
	body, _ := json.Marshal(map[string]any{"query": `mutation { createLeaderboard(input: {id: "fz", windows: [ALL_TIME, DAILY]}) { id } }`})
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	h.ServeHTTP(httptest.NewRecorder(), req)

	f.Fuzz(func(t *testing.T, query, vars string) {
		body := []byte(`{"query":` + jsonString(query) + `,"variables":` + vars + `}`)
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s for %q %q", d, query, vars)
		}
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q %q: %s", rec.Code, query, vars, rec.Body)
		}
		var resp struct {
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("undecodable response %q", rec.Body)
		}
		for _, e := range resp.Errors {
			code, _ := e.Extensions["code"].(string)
			if code == "" || code == "INTERNAL" {
				t.Fatalf("error %q with code %q for %q %q", e.Message, code, query, vars)
			}
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type bytesDiscard struct{}

func (bytesDiscard) Write(p []byte) (int, error) { return len(p), nil }
