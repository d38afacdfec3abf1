package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestMain stops the shared redis-server processes and the PostgreSQL servers of the ledger's tests after the
// package's tests (every root test file shares it).
func TestMain(m *testing.M) { pgtest.Main(redistest.With(m)) }

// Test keys of testServer.
const (
	testAdminKey  = "test-admin-key"
	testSubmitKey = "test-submit-key"
	testReadKey   = "test-read-key"
)

// testServer is an App serving on a free 127.0.0.1 port, stopped in the test's cleanup.
type testServer struct {
	App   *App
	URL   string // http://127.0.0.1:port
	WSURL string // ws://127.0.0.1:port/graphql
	// Console is what the server printed to its console (New's console writer: the generated admin key).
	Console *syncBuffer
	// Store is a leaderboard.Store of the test's own over the server's Redis and key prefix (see
	// independentStore): reads through it never touch the server's hub or response cache.
	Store *leaderboard.Store
	stop  context.CancelFunc
	done  chan error
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testConfig is the configuration startServer uses: the shared standalone Redis, a unique key prefix, an admin
// and a submit key, quiet logs.
func testConfig(t testing.TB) Config {
	t.Helper()
	cfg, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.RedisURL = "redis://" + redistest.SharedStandalone(t).Addr
	cfg.KeyPrefix = redistest.Prefix(t)
	cfg.APIKeys = "admin:" + testAdminKey + ",submit:" + testSubmitKey
	cfg.LogLevel = slog.LevelError
	return cfg
}

// startServer starts an App with cfg (see testConfig), logging warnings and errors to t.Log.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	return startServerLog(t, cfg, testLogger(t))
}

// startServerLog is startServer with the server's logger.
func startServerLog(t testing.TB, cfg Config, log *slog.Logger) *testServer {
	t.Helper()
	return startServerWrapped(t, cfg, log, nil)
}

// startServerWrapped is startServerLog on the listener wrap makes of the TCP one (nil: that one).
func startServerWrapped(t testing.TB, cfg Config, log *slog.Logger, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	console := &syncBuffer{}
	app, err := New(cfg, log, console)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		app.Close()
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{App: app, URL: "http://" + ln.Addr().String(), WSURL: "ws://" + ln.Addr().String() + "/graphql",
		Console: console, Store: independentStore(t, cfg, app), stop: cancel, done: make(chan error, 1)}
	go func() { s.done <- app.Serve(ctx, ln) }()
	t.Cleanup(func() {
		s.Shutdown(t)
		app.Close()
		// The shared client must not keep connections to this server: a later test server may get the same
		// port, and a POST on a dead pooled connection fails with EOF.
		http.DefaultClient.CloseIdleConnections()
	})
	return s
}

// independentStore returns a leaderboard.Store over the Redis and key prefix that the server of cfg uses, with a
// Redis client and a board cache of its own, so that what it reads comes from Redis and not from anything the
// server keeps (hub lists, response cache). It publishes nothing; the client is closed in t's cleanup.
func independentStore(t testing.TB, cfg Config, app *App) *leaderboard.Store {
	t.Helper()
	var rdb redis.UniversalClient
	switch {
	case len(cfg.RedisClusterAddrs) > 0:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisClusterAddrs, Password: cfg.RedisPassword})
	case cfg.RedisURL != "":
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		rdb = redis.NewClient(opts)
	default:
		if app.embedded == nil {
			t.Fatal("no Redis configured and no embedded store")
		}
		rdb = redis.NewClient(&redis.Options{Addr: app.embedded.Addr()})
	}
	t.Cleanup(func() { rdb.Close() })
	return leaderboard.New(rdb, leaderboard.Config{Prefix: cfg.KeyPrefix, PublishCommand: leaderboard.PublishNone})
}

// Shutdown stops the server (as SIGTERM would) and waits for Serve to return.
func (s *testServer) Shutdown(t testing.TB) {
	s.stop()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.done <- nil // later calls return at once
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop within 15s")
	}
}

// testLogger logs errors to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testWriter sends logs to t.Log while the test runs. A server's goroutine that is still ending when the test has
// ended (one waiting for a Redis the test stopped) logs nothing: t.Log then races with the test's end.
type testWriter struct {
	t     testing.TB
	mu    sync.Mutex
	ended bool
}

func (w *testWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// gqlError is one error of a GraphQL response: the one GraphQL error type of the tests (internal/wstest's).
type gqlError = wstest.Error

// gqlResponse is a decoded GraphQL HTTP response.
type gqlResponse struct {
	Status int
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// Codes returns the codes of the errors, in order.
func (r gqlResponse) Codes() []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, e.Code())
	}
	return out
}

// doAvailable is do without a key, again every 20 ms while the answer has errors that are all UNAVAILABLE (a
// board being restored), for at most 10 s; any other error, or one past that, fails the test.
func (s *testServer) doAvailable(t testing.TB, query string, vars map[string]any) gqlResponse {
	t.Helper()
	return s.doAvailableAs(t, "", query, vars)
}

// doAvailableAs is doAvailable with key as bearer token.
func (s *testServer) doAvailableAs(t testing.TB, key, query string, vars map[string]any) gqlResponse {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := s.do(t, key, query, vars)
		if len(r.Errors) == 0 {
			return r
		}
		for _, c := range r.Codes() {
			if c != "UNAVAILABLE" || time.Now().After(deadline) {
				t.Fatalf("%s: %+v", vars, r.Errors)
			}
		}
	}
}

// do POSTs a GraphQL request with key as bearer token ("": none).
func (s *testServer) do(t testing.TB, key, query string, vars map[string]any) gqlResponse {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return s.post(t, key, body)
}

func (s *testServer) post(t testing.TB, key string, body []byte) gqlResponse {
	t.Helper()
	return doRequest(t, s.request(key, body))
}

// request is a POST /graphql with a JSON body and, when key is set, its Authorization header.
func (s *testServer) request(key string, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	// Replayable (a nil Idempotency-Key is not sent): a server with a short READ_TIMEOUT closes a keep-alive
	// connection after a request that took longer (net/http's background read times out), and the shared
	// client's next POST on it failed with EOF under a loaded make test (TestWSDeadlinesCleared); net/http now
	// retries such a request on a new connection (only after a failure on a reused one, before any response).
	req.Header["Idempotency-Key"] = nil
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

func doRequest(t testing.TB, req *http.Request) gqlResponse {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	// net/http's error for it is not exported: its text is what there is to match; or the connection ends (EOF)
	// before any byte of a response.
	for i := 0; err != nil && (strings.Contains(err.Error(), "server closed idle connection") ||
		errors.Is(err, io.EOF)) && req.GetBody != nil && i < 3; i++ {
		// A server with a short READ_TIMEOUT closes a new connection whose request has not arrived in time (a
		// loaded make test): net/http retries only on a reused connection. The server read nothing, so the
		// request is sent again.
		body, gerr := req.GetBody()
		if gerr != nil {
			break
		}
		req = req.Clone(req.Context())
		req.Body = body
		resp, err = http.DefaultClient.Do(req)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := gqlResponse{Status: resp.StatusCode}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("undecodable response (status %d): %q", resp.StatusCode, data)
	}
	out.Status = resp.StatusCode
	for _, e := range out.Errors {
		if e.Code() == "" {
			t.Errorf("error without extensions.code: %+v", e)
		}
	}
	return out
}

// must runs a request that must succeed and decodes its data into out (may be nil).
func (s *testServer) must(t testing.TB, key, query string, vars map[string]any, out any) {
	t.Helper()
	r := s.do(t, key, query, vars)
	if len(r.Errors) > 0 || r.Status != http.StatusOK {
		t.Fatalf("%s\nstatus %d, errors %+v", query, r.Status, r.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			t.Fatalf("decoding %s: %v", r.Data, err)
		}
	}
}

// wantCode runs a request that must fail with exactly one error of code.
func (s *testServer) wantCode(t testing.TB, key, code, query string, vars map[string]any) gqlResponse {
	t.Helper()
	r := s.do(t, key, query, vars)
	if len(r.Errors) != 1 || r.Errors[0].Code() != code {
		t.Fatalf("%s\nwant one %s error, got status %d errors %+v", query, code, r.Status, r.Errors)
	}
	return r
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func getStatus(t testing.TB, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
