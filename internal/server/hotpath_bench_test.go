package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/heapfloor"
	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// BenchmarkHotPath runs the hot operations (submitScore, rank, aroundMe, friends of 100, cached top) through the server's handler (the middleware, the fast path, the
// store and its batcher, go-redis) on the shared test Redis, from 32 goroutines, without net/http's connection
// handling: the part of a request's server CPU that this repository's code decides. Besides ns/op it reports
// allocs/op (exact, so two revisions compare without noise) and cpu-µs/op, the process's CPU time (user and
// system, getrusage) per operation, which leaves out redis-server's but follows the machine's phase (±20 % between
// rounds of one binary on a shared VM). Compare revisions with
//
//	go test -run '^$' -bench HotPath -count 6 ./internal/server
//
// in two checkouts, one after the other; cmd/lbbench measures the whole service.
func BenchmarkHotPath(b *testing.B) {
	cfg := testConfig(b)
	// The collector as the server runs it (server.go): without the floor it would collect several times as often
	// here, and the figures would be the collector's.
	defer heapfloor.Start(uint64(cfg.GCHeapFloor)).Stop()
	s := startServer(b, cfg)
	const board = "hot"
	s.create(b, map[string]any{"id": board})
	const players = 10000
	for i := 0; i < players; i += 1000 { // a board of some size: rank reads walk a real sorted set
		items := make([]map[string]any, 0, 1000)
		for j := i; j < i+1000; j++ {
			items = append(items, map[string]any{"board": board, "playerId": "p" + strconv.Itoa(j), "score": (j * 7919) % 100003})
		}
		s.must(b, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": items}, nil)
	}
	h := s.App.Handler()
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	var seq atomic.Int64
	ops := []struct {
		name  string
		key   string
		query string
		vars  func(n int64) string
	}{
		{"submitScore", testSubmitKey,
			`mutation($in: ScoreInput!) { submitScore(input: $in) { entry { playerId rank score } previousRank updated } }`,
			func(n int64) string {
				p := n // even: a new player; odd: an earlier one with another score
				if n%2 == 1 {
					p = n / 2
				}
				return `{"in":{"board":"hot","playerId":"b` + strconv.FormatInt(p, 10) + `","score":` +
					strconv.FormatInt(n*7919%100003, 10) + `}}`
			}},
		{"rank", "", `query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { playerId rank score } }`,
			func(n int64) string { return `{"b":"hot","p":"p` + strconv.FormatInt(n*7919%players, 10) + `"}` }},
		{"aroundMe", "", `query($b: ID!, $p: ID!) { aroundMe(board: $b, playerId: $p, radius: 5) { playerId rank score } }`,
			func(n int64) string { return `{"b":"hot","p":"p` + strconv.FormatInt(n*7919%players, 10) + `"}` }},
		{"friends", "", `query($b: ID!, $p: ID!, $f: [ID!]!) { friends(board: $b, playerId: $p, friendIds: $f) { playerId rank score } }`,
			func(n int64) string {
				var f strings.Builder
				for i := range int64(100) {
					if i > 0 {
						f.WriteByte(',')
					}
					f.WriteString(`"p` + strconv.FormatInt((n*100+i)*7919%players, 10) + `"`)
				}
				return `{"b":"hot","p":"p` + strconv.FormatInt(n*7919%players, 10) + `","f":[` + f.String() + `]}`
			}},
		{"top", "", `query($b: ID!) { top(board: $b, first: 10) { playerId rank score } }`,
			func(int64) string { return `{"b":"hot"}` }},
	}
	for _, op := range ops {
		body := func(n int64) []byte {
			return []byte(`{"query":` + strconv.Quote(op.query) + `,"variables":` + op.vars(n) + `}`)
		}
		serve := func(n int64) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body(n)))
			r.Header.Set("Content-Type", "application/json")
			if op.key != "" {
				r.Header.Set("Authorization", "Bearer "+op.key)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		b.Run(op.name, func(b *testing.B) {
			for range 3 { // the first runs go through gqlgen, which teaches the fast path the document
				if w := serve(seq.Add(1)); w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
					b.Fatalf("%s: %d %s", op.name, w.Code, w.Body)
				}
			}
			var failed atomic.Value
			b.SetParallelism(16) // 32 goroutines on 2 cores, as lbbench's 32 clients
			b.ReportAllocs()
			before, rBefore := cpuTime(), redisUsage(b, rdb)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := serve(seq.Add(1))
					if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
						failed.Store(w.Body.String())
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
			rAfter := redisUsage(b, rdb)
			b.ReportMetric(float64((rAfter.cpu-rBefore.cpu).Microseconds())/float64(b.N), "redis-µs/op")
			b.ReportMetric(float64(rAfter.calls-rBefore.calls)/float64(b.N), "calls/op")
			if f := failed.Load(); f != nil {
				b.Fatalf("%s failed: %s", op.name, f)
			}
		})
	}
}

// redisState is what redis-server reports of its own work: its CPU time (user and system) and the script calls
// it received (FCALL, EVALSHA, EVAL and their _RO forms).
type redisState struct {
	cpu   time.Duration
	calls int64
}

// redisUsage reads INFO's cpu and commandstats sections. The shared test Redis serves only this benchmark while
// it runs, but the INFO calls themselves count: two calls, one per reading, far below one per op.
func redisUsage(b *testing.B, rdb *redis.Client) redisState {
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var st redisState
	for _, name := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, _ := redisinfo.Field(info, name)
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("INFO %s: %q", name, v)
		}
		st.cpu += time.Duration(sec * float64(time.Second))
	}
	// The commands a script runs are counted under their own names too, so only the script calls are summed.
	for name, c := range redisinfo.CommandStats(info) {
		if redisinfo.IsScriptCommand(name) {
			st.calls += c.Calls
		}
	}
	return st
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
