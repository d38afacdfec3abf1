package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// rawResponse is an HTTP response as the client got it, byte for byte.
type rawResponse struct {
	status      int
	contentType string
	body        []byte
}

// raw POSTs a GraphQL request and returns the response as it came (no decoding).
func (s *testServer) raw(t testing.TB, key, query string, vars map[string]any) rawResponse {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return rawDo(t, s.request(key, body))
}

func rawDo(t testing.TB, req *http.Request) rawResponse {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{resp.StatusCode, resp.Header.Get("Content-Type"), data}
}

// metric returns the value of one sample of /metrics (0 when absent).
func (s *testServer) metric(t testing.TB, sample string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(data)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

const topHits = `lb_top_cache_requests_total{result="hit"}`

// cachedRaw repeats a request until it is answered from the response cache (the hub caches a view after its
// first read and then needs a moment to load it), and returns that answer.
func (s *testServer) cachedRaw(t testing.TB, key, query string, vars map[string]any) rawResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // generous: under load the hub may re-read the list a few times first
	for {
		before := s.metric(t, topHits)
		r := s.raw(t, key, query, vars)
		if s.metric(t, topHits) > before {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: never served from the cache; last answer %d %s", query, vars, r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const topQuery = `query($b: ID!, $n: Int, $o: Int) { top(board: $b, first: $n, offset: $o) { ` + entryFields + ` } }`

func TestTopCache(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "tc", "windows": []string{"ALL_TIME", "DAILY"}})
	for i := 1; i <= 5; i++ {
		s.submit(t, map[string]any{"board": "tc", "playerId": fmt.Sprintf("p%d", i), "score": float64(10 * i),
			"displayName": fmt.Sprintf("P%d", i)})
	}
	vars := map[string]any{"b": "tc", "n": 3}

	t.Run("identical bytes", func(t *testing.T) {
		miss := s.raw(t, "", topQuery, vars) // executed by gqlgen
		hit := s.cachedRaw(t, "", topQuery, vars)
		if hit.status != http.StatusOK || hit.contentType != miss.contentType || !bytes.Equal(hit.body, miss.body) {
			t.Fatalf("cached answer differs:\n%d %s %s\n%d %s %s", miss.status, miss.contentType, miss.body,
				hit.status, hit.contentType, hit.body)
		}
		if got := ids(decodeTop(t, hit.body, "top")); got != "p5:1 p4:2 p3:3" {
			t.Fatalf("top 3: %s", got)
		}
		before := s.metric(t, topHits)
		for range 5 {
			if r := s.raw(t, "", topQuery, vars); !bytes.Equal(r.body, miss.body) {
				t.Fatalf("repeat: %s", r.body)
			}
		}
		if d := s.metric(t, topHits) - before; d != 5 {
			t.Fatalf("5 repeats made %v cache hits", d)
		}
		// A hit still counts as a successful top query.
		ops := `lb_graphql_operations_total{field="top",outcome="ok",type="query"}`
		before = s.metric(t, ops)
		s.raw(t, "", topQuery, vars)
		if d := s.metric(t, ops) - before; d != 1 {
			t.Fatalf("operations counter moved by %v", d)
		}
	})

	t.Run("variables, offsets and aliases are separate entries", func(t *testing.T) {
		for _, c := range []struct {
			query string
			vars  map[string]any
			field string
			want  string
		}{
			{topQuery, map[string]any{"b": "tc", "n": 2}, "top", "p5:1 p4:2"},
			{topQuery, map[string]any{"b": "tc", "n": 2, "o": 1}, "top", "p4:2 p3:3"},
			{topQuery, map[string]any{"o": 3, "b": "tc"}, "top", "p2:4 p1:5"},
			{`{ top(board: "tc") { playerId rank } }`, nil, "top", "p5:1 p4:2 p3:3 p2:4 p1:5"},
			{`{ x: top(board: "tc", first: 1) { playerId rank } }`, nil, "x", "p5:1"},
			{`{ x: top(board: "tc", first: 1) { playerId rank }
				y: top(board: "tc", offset: 4, window: DAILY) { playerId rank } }`, nil, "y", "p1:5"},
			{`query($w: Window = DAILY, $n: Int = 2) { top(board: "tc", window: $w, first: $n) { playerId rank } }`,
				nil, "top", "p5:1 p4:2"},
		} {
			r := s.cachedRaw(t, "", c.query, c.vars)
			if got := ids(decodeTop(t, r.body, c.field)); got != c.want {
				t.Errorf("%s %v: %s, want %s", c.query, c.vars, got, c.want)
			}
		}
	})

	t.Run("a change is never hidden", func(t *testing.T) {
		q := `{ top(board: "tc", first: 2) { playerId rank score } }`
		s.cachedRaw(t, "", q, nil)
		s.submit(t, map[string]any{"board": "tc", "playerId": "p1", "score": 1000.0})
		deadline := time.Now().Add(2 * time.Second)
		for {
			got := ids(decodeTop(t, s.raw(t, "", q, nil).body, "top"))
			if got == "p1:1 p5:2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %s 2s after the change", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.cachedRaw(t, "", q, nil)
		for range 20 {
			if got := ids(decodeTop(t, s.raw(t, "", q, nil).body, "top")); got != "p1:1 p5:2" {
				t.Fatalf("the old list came back: %s", got)
			}
		}
		// The old list must not come back later either: up to the next change showing, every answer is the
		// current list (a late stale re-read would put "p5:1 p4:2" back).
		s.submit(t, map[string]any{"board": "tc", "playerId": "p2", "score": 2000.0})
		deadline = time.Now().Add(2 * time.Second)
		for {
			got := ids(decodeTop(t, s.raw(t, "", q, nil).body, "top"))
			if got == "p2:1 p1:2" {
				break
			}
			if got != "p1:1 p5:2" {
				t.Fatalf("before the next change showed, the list was %s", got)
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %s 2s after the next change", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("GET", func(t *testing.T) {
		u := s.URL + "/graphql?query=" + url.QueryEscape(`query($b: ID!) { top(board: $b, first: 1) { playerId } }`) +
			"&variables=" + url.QueryEscape(`{"b":"tc"}`)
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		first := rawDo(t, req)
		deadline := time.Now().Add(3 * time.Second)
		for {
			before := s.metric(t, topHits)
			r := rawDo(t, req)
			if !bytes.Equal(r.body, first.body) || r.status != http.StatusOK {
				t.Fatalf("GET: %d %s, first %s", r.status, r.body, first.body)
			}
			if s.metric(t, topHits) > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("GET never served from the cache")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("errors stay gqlgen's", func(t *testing.T) {
		for range 3 {
			s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "tc") { nope } }`, nil)
			s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "tc", first: -1) { rank } }`, nil)
			s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "tc", first: 1001) { rank } }`, nil)
			s.wantCode(t, "", "NOT_FOUND", `{ top(board: "nope") { rank } }`, nil)
			s.wantCode(t, "", "BAD_USER_INPUT", topQuery, map[string]any{"n": 2})
		}
		// A string for an Int ("2") is refused, as a string score is; the cache leaves such values to gqlgen.
		for range 2 {
			s.wantCode(t, "", "BAD_USER_INPUT", topQuery, map[string]any{"b": "tc", "n": "2"})
		}
		// Beyond the live top 100: read from Redis every time, still correct.
		for range 2 {
			var out struct{ Top []entry }
			s.must(t, "", `{ top(board: "tc", offset: 95, first: 10) { rank } }`, nil, &out)
			if len(out.Top) != 0 {
				t.Fatalf("offset 95: %+v", out.Top)
			}
		}
	})
}

func decodeTop(t testing.TB, body []byte, field string) []entry {
	t.Helper()
	var resp struct {
		Data   map[string][]entry
		Errors []gqlError
	}
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Errors) > 0 {
		t.Fatalf("response %s: %v", body, err)
	}
	return resp.Data[field]
}

func TestTopCacheReadKey(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "rk"})
	s.submit(t, map[string]any{"board": "rk", "playerId": "a", "score": 1.0})
	q := `{ top(board: "rk") { playerId } }`
	hit := s.cachedRaw(t, testReadKey, q, nil)
	if got := ids(decodeTop(t, hit.body, "top")); got != "a:0" {
		t.Fatalf("with the read key: %s", hit.body)
	}
	for range 3 {
		s.wantCode(t, "", "UNAUTHENTICATED", q, nil)
		s.wantCode(t, "wrong-key", "UNAUTHENTICATED", q, nil)
	}
	if r := s.raw(t, testSubmitKey, q, nil); !bytes.Equal(r.body, hit.body) {
		t.Fatalf("with a submit key: %s", r.body)
	}
}

// The response cache follows what a list shows beyond ranks and scores: a name-only or metadata-only change and
// joins below the top 100 (size and topPercent) reach cached answers within about a second. Compared with the
// test's own Store (an independent read), every field.
func TestTopCacheFollowsNamesAndSize(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "tn"})
	var in []map[string]any
	for i := range 100 {
		in = append(in, map[string]any{"board": "tn", "playerId": fmt.Sprint("p", i), "score": 1000 - i,
			"displayName": fmt.Sprint("P", i)})
	}
	s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in}, nil)
	vars := map[string]any{"b": "tn", "n": 5}
	matches := func() (bool, string) {
		r := s.cachedRaw(t, "", topQuery, vars)
		got := decodeTop(t, r.body, "top")
		want, err := s.Store.Top(context.Background(), leaderboard.View{Board: "tn"}, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want.Entries) {
			return false, fmt.Sprintf("%d rows, want %d", len(got), len(want.Entries))
		}
		for i, e := range want.Entries {
			g := got[i]
			name := ""
			if e.DisplayName != nil {
				name = *e.DisplayName
			}
			if g.PlayerID != e.PlayerID || g.Rank != int(e.Rank) || g.Score != e.Score || g.TopPercent != e.TopPercent ||
				g.DisplayName == nil || *g.DisplayName != name || !g.UpdatedAt.Equal(e.UpdatedAt) ||
				string(g.Metadata) != string(e.Metadata) && !(len(e.Metadata) == 0 && string(g.Metadata) == "null") {
				return false, fmt.Sprintf("row %d: %+v, want %+v", i, g, e)
			}
		}
		return true, ""
	}
	waitMatch := func(what string) {
		t.Helper()
		deadline := time.Now().Add(1500 * time.Millisecond)
		for {
			ok, diff := matches()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cached answer is stale: %s", what, diff)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitMatch("start")
	s.submit(t, map[string]any{"board": "tn", "playerId": "p0", "score": 1000, "displayName": "Renamed"})
	waitMatch("a new name")
	s.submit(t, map[string]any{"board": "tn", "playerId": "p1", "score": 999, "metadata": map[string]any{"k": 1}})
	waitMatch("new metadata")
	in = in[:0]
	for i := range 900 {
		in = append(in, map[string]any{"board": "tn", "playerId": fmt.Sprint("low", i), "score": i})
	}
	s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in[:500]}, nil)
	s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in[500:]}, nil)
	s.submit(t, map[string]any{"board": "tn", "playerId": "last", "score": -1})
	waitMatch("joins below the top 100")
}
