package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// introspectionQuery is the query GraphiQL (graphql-js getIntrospectionQuery) sends.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
  ofType { kind name ofType { kind name ofType { kind name } } } } } } } }`

// doubling returns the 1.3 KB document whose complexity walk doubled per fragment: F0 spreads F1 twice, F1 F2
// twice, ..., F40 is __typename.
func doubling(n int) string {
	var b strings.Builder
	b.WriteString("query { ...F0 }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { __typename }\n", n)
	return b.String()
}

func aliases(n int, sel string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " a%d: %s", i, sel)
	}
	b.WriteString(" }")
	return b.String()
}

// within runs f and fails when it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > d {
		t.Fatalf("%s took %v, want at most %v", what, took, d)
	}
}

// reason returns extensions.reason of the response's first error.
func reason(r gqlResponse) string {
	if len(r.Errors) == 0 {
		return ""
	}
	s, _ := r.Errors[0].Extensions["reason"].(string)
	return s
}

// Documents that cost far more than their size are refused quickly, on every transport, before they run.
func TestHostileDocuments(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "h"})

	t.Run("doubling fragments", func(t *testing.T) {
		q := doubling(40)
		if len(q) > 2000 {
			t.Fatalf("document of %d bytes", len(q))
		}
		within(t, 2*time.Second, "POST", func() {
			if r := s.do(t, "", q, nil); r.Status != 422 && reason(r) != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Fatalf("POST: status %d %+v", r.Status, r.Errors)
			}
		})
		within(t, 2*time.Second, "GET", func() {
			resp, err := http.Get(s.URL + "/graphql?query=" + url.QueryEscape(q))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "COMPLEXITY_LIMIT_EXCEEDED") {
				t.Fatalf("GET: %d %s", resp.StatusCode, body)
			}
		})
	})

	t.Run("introspection amplification", func(t *testing.T) {
		// The whole-schema introspection GraphiQL sends still works...
		var out struct {
			Schema struct{ Types []struct{ Name string } } `json:"__schema"`
		}
		s.must(t, "", introspectionQuery, nil, &out)
		if len(out.Schema.Types) < 10 {
			t.Fatalf("introspection: %d types", len(out.Schema.Types))
		}
		// ...but not thousands of them in one request.
		q := aliases(2000, "__schema { types { name fields { name type { name } } } }")
		within(t, 2*time.Second, "2000 aliased introspections", func() {
			r := s.do(t, "", q, nil)
			if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || len(r.Data) > 10 {
				t.Fatalf("status %d errors %+v data %d bytes", r.Status, r.Errors, len(r.Data))
			}
		})
		if r := s.do(t, "", aliases(30, "__schema { queryType { name } }"), nil); reason(r) != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Fatalf("30 introspections: %+v", r.Errors)
		}
	})

	t.Run("many aliases", func(t *testing.T) {
		for _, q := range []string{aliases(40000, "__typename"), aliases(5000, "__typename"),
			aliases(1001, `top(board: "h", first: 1) { rank }`)} {
			within(t, 2*time.Second, fmt.Sprintf("%d bytes of aliases", len(q)), func() {
				r := s.do(t, "", q, nil)
				if len(r.Errors) == 0 || r.Errors[0].Code() != "BAD_USER_INPUT" {
					t.Fatalf("%d bytes: status %d errors %+v", len(q), r.Status, r.Errors)
				}
			})
		}
		// The bound is on the document, not on honest use: 1000 aliases are fine.
		var out map[string]any
		s.must(t, "", aliases(1000, "__typename"), nil, &out)
		if len(out) != 1000 {
			t.Fatalf("%d answers", len(out))
		}
	})
}

// Parsed documents are kept within QUERY_CACHE_BYTES: many distinct large documents do not pile up.
func TestDocumentCacheIsBoundedByBytes(t *testing.T) {
	c := newDocCache(1000, 8<<20)
	for i := range 200 {
		q := fmt.Sprintf("query Q%d { %s }", i, strings.Repeat("__typename ", 10_000)) // ~110 KB
		c.Add(context.Background(), q, nil)
	}
	if n, size := c.lru.Stats(); size > 8<<20 || n > 3 {
		t.Fatalf("%d documents estimated at %d bytes kept, want at most 8 MiB", n, size)
	}
	apq := newAPQCache(1000, 8<<20)
	for i := range 200 {
		apq.Add(context.Background(), fmt.Sprint("hash", i), strings.Repeat("x", 500_000))
	}
	if n, size := apq.lru.Stats(); size > 8<<20 || n > 16 {
		t.Fatalf("%d persisted queries of %d bytes kept, want at most 8 MiB", n, size)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	cfg := testConfig(t)
	cfg.QueryCacheBytes = 16 << 20
	s := startServer(t, cfg)
	for i := range 60 { // each ~60 KB of text, 2000 fields: refused only after parsing and validation
		q := fmt.Sprintf("query Q%d %s", i, aliases(990, "__typename"))
		s.must(t, "", q, nil, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapAlloc) - int64(before); grown > 100<<20 {
		t.Fatalf("heap grew by %d MiB after 60 large documents", grown>>20)
	}
}

// A flood of anonymous reads (far more than the Redis pool has connections) gets RATE_LIMITED answers, never
// UNAVAILABLE; game servers' submits keep going; /readyz stays ready.
func TestReadFloodLeavesRoomForWrites(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxConcurrentReads, cfg.MaxConcurrentWrites = 4, 4
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "flood"})
	var in []map[string]any
	for i := range 1000 {
		in = append(in, map[string]any{"board": "flood", "playerId": fmt.Sprint("p", i), "score": i})
	}
	s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in}, nil)
	// 24 aliases of top(first: 600) at offset 100 (beyond the hub's cache, so every one reads Redis).
	q := aliases(24, `top(board: "flood", first: 600, offset: 100) { rank playerId score }`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := s.do(t, "", q, nil)
				mu.Lock()
				if len(r.Errors) == 0 {
					codes["ok"]++
				}
				for _, c := range r.Codes() {
					codes[c]++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the flood is under way
	var worst time.Duration
	for i := range 30 {
		start := time.Now()
		s.submit(t, map[string]any{"board": "flood", "playerId": fmt.Sprint("w", i), "score": 5000 + i})
		worst = max(worst, time.Since(start))
		if st := getStatus(t, s.URL+"/readyz"); st != http.StatusOK {
			t.Fatalf("/readyz %d during a read flood", st)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("answers during the flood: %v; slowest submit %v", codes, worst)
	if codes["UNAVAILABLE"] > 0 || codes["INTERNAL"] > 0 {
		t.Fatalf("a local overload answered %v", codes)
	}
	if codes["RATE_LIMITED"] == 0 {
		t.Fatalf("the flood never reached the bound: %v", codes)
	}
	if worst > 2*time.Second {
		t.Fatalf("a submit took %v during the flood", worst)
	}
}

// Slow uploads are cut off at READ_TIMEOUT, and beyond MAX_CONNS the longest-idle keep-alive connection makes
// room for a new one.
func TestSlowAndIdleConnections(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReadTimeout = time.Second
	cfg.MaxConns = 10
	s := startServer(t, cfg)
	addr := strings.TrimPrefix(s.URL, "http://")

	// A body sent at one byte a second.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := c.Write(buf[:1]); err != nil {
				closed <- time.Since(start)
				return
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := c.Read(make([]byte, 4096)); err != nil && !isTimeout(err) {
				closed <- time.Since(start)
				return
			}
		}
	}()
	select {
	case d := <-closed:
		t.Logf("slow upload cut off after %v", d)
	case <-time.After(5 * time.Second):
		t.Fatal("a slow upload was still open after 5 s with READ_TIMEOUT 1s")
	}

	// Ten idle keep-alive connections, then a new client: it is served (an idle one is closed for it).
	var idle []net.Conn
	for range 10 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		idle = append(idle, conn)
	}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	resp, err := cl.Get(s.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a new client beside 10 idle connections (MAX_CONNS 10): %v %v", resp, err)
	}
	resp.Body.Close()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Without CORS_ORIGINS no origin may call cross-origin; with it, only the listed ones.
func TestCORSDefaultsToSameOrigin(t *testing.T) {
	t.Parallel()
	preflight := func(s *testServer, origin string) string {
		req, _ := http.NewRequest(http.MethodOptions, s.URL+"/graphql", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	s := startServer(t, testConfig(t))
	if got := preflight(s, "https://evil.example"); got != "" {
		t.Fatalf("default CORS allowed %q", got)
	}
	req := s.request(testSubmitKey, []byte(`{"query":"{ __typename }"}`))
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Fatalf("a cross-origin POST was answered with Access-Control-Allow-Origin %q", got)
	}
	cfg := testConfig(t)
	cfg.CORSOrigins = []string{"https://scores.example"}
	s2 := startServer(t, cfg)
	if got := preflight(s2, "https://scores.example"); got != "https://scores.example" {
		t.Fatalf("listed origin: %q", got)
	}
	if got := preflight(s2, "https://evil.example"); got != "" {
		t.Fatalf("unlisted origin: %q", got)
	}
}

// Ids in invalid UTF-8 (raw bytes, or escapes of lone surrogates) are refused before anything decodes them, so
// they cannot alias each other through U+FFFD.
func TestInvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "u"})
	s.submit(t, map[string]any{"board": "u", "playerId": "\ufffd", "score": 1})
	rank := `{"query":"query($p: ID!) { rank(board: \"u\", playerId: $p) { playerId } }","variables":{"p":%s}}`
	for _, p := range []string{`"\ud800"`, "\"\xff\"", "\"lit\xc3\"", `"\udc00x"`} {
		r := s.post(t, "", []byte(fmt.Sprintf(rank, p)))
		if r.Status != http.StatusBadRequest || len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Fatalf("player %q: status %d %+v %s", p, r.Status, r.Errors, r.Data)
		}
	}
	// A literal in the document, and the GET transport.
	r := s.post(t, "", []byte(`{"query":"{ rank(board: \"u\", playerId: \"\\ud800\") { playerId } }"}`))
	if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
		t.Fatalf("literal: %+v %s", r.Errors, r.Data)
	}
	resp, err := http.Get(s.URL + "/graphql?query=" + url.QueryEscape(`{ rank(board: "u", playerId: "`+"\xff"+`") { playerId } }`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET with invalid UTF-8: %d", resp.StatusCode)
	}
	// Valid pairs and U+FFFD itself are fine.
	var out struct{ Rank *struct{ PlayerID string } }
	s.must(t, "", `query($p: ID!) { rank(board: "u", playerId: $p) { playerId } }`, map[string]any{"p": "\ufffd"}, &out)
	if out.Rank == nil || out.Rank.PlayerID != "\ufffd" {
		t.Fatalf("U+FFFD player: %+v", out.Rank)
	}
	r = s.post(t, "", []byte(fmt.Sprintf(rank, `"\ud83c\udfae"`)))
	if len(r.Errors) != 0 || string(r.Data) != `{"rank":null}` {
		t.Fatalf("a valid surrogate pair: %+v %s", r.Errors, r.Data)
	}
}

// Requests refused by the server's own bounds answer the same way whatever the body's framing.
func TestHonestAnswers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxBodyBytes = 1000
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "hn"})
	big := []byte(`{"query":"{ __typename }","variables":{"x":"` + strings.Repeat("y", 2000) + `"}}`)
	for _, chunked := range []bool{false, true} {
		req := s.request("", big)
		if chunked {
			req.ContentLength = -1
			req.Body = io.NopCloser(strings.NewReader(string(big)))
		}
		r := doRequest(t, req)
		if r.Status != http.StatusRequestEntityTooLarge || len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Fatalf("chunked %v: status %d %+v", chunked, r.Status, r.Errors)
		}
	}
	// Strings for Ints are refused like strings for Floats; a year-1 achievedAt is not "now".
	s.wantCode(t, "", "BAD_USER_INPUT", `query($n: Int) { top(board: "hn", first: $n) { rank } }`, map[string]any{"n": "10"})
	s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", submitMutation, map[string]any{"in": map[string]any{
		"board": "hn", "playerId": "p", "score": 1, "achievedAt": "0001-01-01T00:00:00Z"}})
	if got := s.top(t, "hn", 10); len(got) != 0 {
		t.Fatalf("refused submissions wrote %+v", got)
	}
}

// A write whose answer Redis did not give in time says that it may have been applied (it was, here), and the
// readiness probe answers within its second while Redis stalls.
func TestStalledRedisAnswersHonestly(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + srv.Addr
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "stall", "mode": "SUM"})
	ctl := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer ctl.Close()
	if err := ctl.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// A script that keeps Redis busy for 4.5 s (other clients wait; DEBUG SLEEP is disabled by default).
	go ctl.Eval(context.Background(), `local t0 = redis.call('TIME')
		local t = t0
		while (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) < 4500000 do t = redis.call('TIME') end
		return 1`, nil)
	time.Sleep(200 * time.Millisecond)
	var ready int
	within(t, 1500*time.Millisecond, "/readyz while Redis stalls", func() { ready = getStatus(t, s.URL+"/readyz") })
	if ready != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d while Redis stalls", ready)
	}
	r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "stall", "playerId": "p",
		"score": 7, "eventId": "e1"}})
	if len(r.Errors) != 1 || r.Errors[0].Code() != "UNAVAILABLE" || r.Errors[0].Extensions["outcome"] != "UNKNOWN" {
		t.Fatalf("submit during a stall: %+v", r.Errors)
	}
	// Once Redis is back, the retry with the same eventId applies it at most once, whichever way it went.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "stall", "playerId": "p",
			"score": 7, "eventId": "e1"}})
		if len(r.Errors) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var res struct{ SubmitScore scoreResult }
	if err := json.Unmarshal(r.Data, &res); err != nil || len(r.Errors) != 0 || res.SubmitScore.Entry.Score != 7 {
		t.Fatalf("retry after the stall: %+v %s", r.Errors, r.Data)
	}
	t.Logf("the write during the stall had been applied: %v", res.SubmitScore.Duplicate)
	if got := s.top(t, "stall", 1); len(got) != 1 || got[0].Score != 7 {
		t.Fatalf("total after the retry: %+v", got)
	}
	// With Redis down, nothing can have been applied: no outcome mark.
	srv.Stop()
	r = s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "stall", "playerId": "q",
		"score": 1}})
	if len(r.Errors) != 1 || r.Errors[0].Code() != "UNAVAILABLE" || r.Errors[0].Extensions["outcome"] != nil {
		t.Fatalf("submit with Redis down: %+v", r.Errors)
	}
}

// METRICS_ADDR moves /metrics off the public listener.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetricsAddr = ln.Addr().String()
	ln.Close()
	s := startServer(t, cfg)
	if st := getStatus(t, s.URL+"/metrics"); st == http.StatusOK {
		t.Fatal("/metrics still served on the public listener")
	}
	var st int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + cfg.MetricsAddr + "/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if st = resp.StatusCode; st == 200 && strings.Contains(string(body), "lb_graphql_operations_total") {
				return
			}
		}
	}
	t.Fatalf("/metrics on METRICS_ADDR: %d", st)
}

// The document bounds leave honest use alone: a literal submitScores of 1000 items with names, eventIds and
// metadata (about 27000 tokens, the README's figure) runs with the default MAX_QUERY_TOKENS.
func TestBulkLiteralFitsTheTokenLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "lit"})
	var b strings.Builder
	b.WriteString("mutation { submitScores(inputs: [")
	for i := range 1000 {
		fmt.Fprintf(&b, `{board: "lit", playerId: "player-%d", score: %d, displayName: "Player %d", eventId: "match-1-%d", metadata: {team: "red", level: 3}}`, i, i, i, i)
	}
	b.WriteString("]) { updated } }")
	var out struct{ SubmitScores []struct{ Updated bool } }
	s.must(t, testSubmitKey, b.String(), nil, &out)
	if len(out.SubmitScores) != 1000 || !out.SubmitScores[999].Updated {
		t.Fatalf("%d results", len(out.SubmitScores))
	}
}

// SIGTERM does not wait for slow uploads: a body still arriving ends at once, the shutdown takes well under its
// timeout.
func TestShutdownDoesNotWaitForSlowUploads(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t)) // READ_TIMEOUT 15 s, SHUTDOWN_TIMEOUT 8 s
	addr := strings.TrimPrefix(s.URL, "http://")
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond) // the requests are in their handlers, reading
	within(t, 2*time.Second, "shutdown with 20 slow uploads", func() { s.Shutdown(t) })
}

// Websocket origins are checked against the server's own origins, never against the Host header the request
// brings (DNS rebinding: Host: evil.example with Origin: https://evil.example).
func TestWebsocketOriginIgnoresHost(t *testing.T) {
	t.Parallel()
	dial := func(s *testServer, host, origin string) int {
		h := http.Header{"Origin": {origin}, "Sec-WebSocket-Protocol": {"graphql-transport-ws"}}
		if host != "" {
			h.Set("Host", host)
		}
		c, resp, err := websocket.DefaultDialer.Dial(s.WSURL, h)
		if err == nil {
			c.Close()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	s := startServer(t, testConfig(t))
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example", "https://evil.example", http.StatusForbidden},
		{"evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{"", "http://127.0.0.1:" + port, http.StatusSwitchingProtocols},
		{"", "http://localhost:" + port, http.StatusSwitchingProtocols},
		{"", "http://127.0.0.1:1", http.StatusForbidden},
	} {
		if got := dial(s, c.host, c.origin); got != c.want {
			t.Errorf("Host %q Origin %q: %d, want %d", c.host, c.origin, got, c.want)
		}
	}
	cfg := testConfig(t)
	cfg.PublicOrigins = []string{"https://scores.example"}
	s2 := startServer(t, cfg)
	port2 := s2.URL[strings.LastIndex(s2.URL, ":")+1:]
	if got := dial(s2, "scores.example", "https://scores.example"); got != http.StatusSwitchingProtocols {
		t.Errorf("PUBLIC_ORIGIN: %d", got)
	}
	if got := dial(s2, "", "http://127.0.0.1:"+port2); got != http.StatusForbidden {
		t.Errorf("loopback with PUBLIC_ORIGIN set: %d", got)
	}
}
