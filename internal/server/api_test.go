package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

type entry struct {
	PlayerID    string          `json:"playerId"`
	DisplayName *string         `json:"displayName"`
	Rank        int             `json:"rank"`
	Approximate bool            `json:"approximate"`
	Score       float64         `json:"score"`
	TopPercent  float64         `json:"topPercent"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	Metadata    json.RawMessage `json:"metadata"`
}

type scoreResult struct {
	Entry         entry    `json:"entry"`
	PreviousRank  *int     `json:"previousRank"`
	PreviousScore *float64 `json:"previousScore"`
	Updated       bool     `json:"updated"`
	Duplicate     bool     `json:"duplicate"`
}

const entryFields = `playerId displayName rank approximate score topPercent updatedAt metadata`

const createMutation = `mutation($in: LeaderboardInput!) { createLeaderboard(input: $in) {
	id title order mode windows timezone exactTop currentPeriod nextReset size } }`

const submitMutation = `mutation($in: ScoreInput!) { submitScore(input: $in) {
	entry { ` + entryFields + ` } previousRank previousScore updated duplicate } }`

func (s *testServer) create(t testing.TB, in map[string]any) {
	t.Helper()
	s.must(t, testAdminKey, createMutation, map[string]any{"in": in}, nil)
}

func (s *testServer) submit(t testing.TB, in map[string]any) scoreResult {
	t.Helper()
	var out struct{ SubmitScore scoreResult }
	s.must(t, testSubmitKey, submitMutation, map[string]any{"in": in}, &out)
	return out.SubmitScore
}

func (s *testServer) top(t testing.TB, board string, first int) []entry {
	t.Helper()
	var out struct{ Top []entry }
	s.must(t, "", `query($b: ID!, $n: Int) { top(board: $b, first: $n) { `+entryFields+` } }`,
		map[string]any{"b": board, "n": first}, &out)
	return out.Top
}

func ids(es []entry) string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s:%d", e.PlayerID, e.Rank))
	}
	return strings.Join(out, " ")
}

// coreSuite is a representative part of the core's behaviour, through GraphQL. It runs on real Redis and on the
// embedded store (TestEmbeddedStore), so the two cannot drift apart.
func coreSuite(t *testing.T, s *testServer) {
	t.Run("create", func(t *testing.T) {
		var out struct {
			CreateLeaderboard struct {
				ID, Order, Mode, Timezone, CurrentPeriod string
				Title                                    *string
				Windows                                  []string
				ExactTop                                 *int
				NextReset                                *time.Time
				Size                                     int
			}
		}
		s.must(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": "points {x}:😀",
			"title": "Points", "windows": []string{"WEEKLY", "ALL_TIME"}, "timezone": "Europe/Berlin"}}, &out)
		b := out.CreateLeaderboard
		if b.ID != "points {x}:😀" || *b.Title != "Points" || b.Order != "DESC" || b.Mode != "BEST" ||
			strings.Join(b.Windows, ",") != "WEEKLY,ALL_TIME" || b.Timezone != "Europe/Berlin" || b.ExactTop != nil ||
			b.Size != 0 || !strings.Contains(b.CurrentPeriod, "-W") || b.NextReset == nil {
			t.Fatalf("created %+v", b)
		}
		// The same definition again returns the board; a different one is a conflict.
		s.must(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": "points {x}:😀",
			"title": "Points", "windows": []string{"WEEKLY", "ALL_TIME"}, "timezone": "Europe/Berlin"}}, nil)
		s.wantCode(t, testAdminKey, "CONFLICT", createMutation, map[string]any{"in": map[string]any{"id": "points {x}:😀"}})
	})

	t.Run("fair ties and modes", func(t *testing.T) {
		s.create(t, map[string]any{"id": "best"})
		first := s.submit(t, map[string]any{"board": "best", "playerId": "a", "score": 10, "displayName": "Ann",
			"metadata": map[string]any{"team": "red"}})
		if first.PreviousRank != nil || !first.Updated || first.Entry.Rank != 1 || *first.Entry.DisplayName != "Ann" ||
			string(first.Entry.Metadata) != `{"team":"red"}` {
			t.Fatalf("first submit %+v", first)
		}
		s.submit(t, map[string]any{"board": "best", "playerId": "b", "score": 10})
		s.submit(t, map[string]any{"board": "best", "playerId": "c", "score": 20})
		if got := ids(s.top(t, "best", 10)); got != "c:1 a:2 b:3" {
			t.Fatalf("equal scores must rank by arrival: %s", got)
		}
		worse := s.submit(t, map[string]any{"board": "best", "playerId": "c", "score": 5})
		if worse.Updated || worse.Entry.Score != 20 || *worse.PreviousRank != 1 || *worse.PreviousScore != 20 {
			t.Fatalf("BEST keeps the better score: %+v", worse)
		}

		s.create(t, map[string]any{"id": "sum", "mode": "SUM"})
		s.submit(t, map[string]any{"board": "sum", "playerId": "a", "score": 5})
		r := s.submit(t, map[string]any{"board": "sum", "playerId": "a", "score": -2.5})
		if r.Entry.Score != 2.5 {
			t.Fatalf("SUM: %+v", r)
		}
		s.create(t, map[string]any{"id": "laps", "order": "ASC", "mode": "LATEST"})
		s.submit(t, map[string]any{"board": "laps", "playerId": "a", "score": 61.5})
		s.submit(t, map[string]any{"board": "laps", "playerId": "b", "score": 59})
		r = s.submit(t, map[string]any{"board": "laps", "playerId": "b", "score": 70})
		if !r.Updated || r.Entry.Rank != 2 {
			t.Fatalf("LATEST on ASC: %+v", r)
		}
	})

	t.Run("eventId", func(t *testing.T) {
		s.create(t, map[string]any{"id": "dedupe", "mode": "SUM"})
		a := s.submit(t, map[string]any{"board": "dedupe", "playerId": "p", "score": 3, "eventId": "e1"})
		b := s.submit(t, map[string]any{"board": "dedupe", "playerId": "p", "score": 3, "eventId": "e1"})
		if a.Duplicate || !b.Duplicate || b.Entry.Score != 3 || b.Entry.Rank != a.Entry.Rank || b.Updated != a.Updated {
			t.Fatalf("a retry must get the first result back: %+v then %+v", a, b)
		}
	})

	t.Run("reads", func(t *testing.T) {
		s.create(t, map[string]any{"id": "reads", "windows": []string{"ALL_TIME", "DAILY"}})
		var items []map[string]any
		for i := 1; i <= 20; i++ {
			items = append(items, map[string]any{"board": "reads", "playerId": fmt.Sprintf("p%02d", i), "score": i})
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { rank } } }`,
			map[string]any{"in": items}, nil)
		var out struct {
			Top, AroundMe, Friends, Edge []entry
			Rank, Missing                *entry
			Daily                        []entry
		}
		s.must(t, "", `{
			top(board: "reads", first: 3, offset: 1) { playerId rank topPercent }
			rank(board: "reads", playerId: "p10") { playerId rank score }
			missing: rank(board: "reads", playerId: "nobody") { rank }
			aroundMe(board: "reads", playerId: "p10", radius: 2) { playerId rank }
			edge: aroundMe(board: "reads", playerId: "p20", radius: 2) { playerId rank }
			friends(board: "reads", playerId: "p01", friendIds: ["p15", "p03", "ghost"]) { playerId rank }
			daily: top(board: "reads", window: DAILY) { playerId }
		}`, nil, &out)
		if ids(out.Top) != "p19:2 p18:3 p17:4" || out.Top[0].TopPercent != 10 {
			t.Errorf("top %s %+v", ids(out.Top), out.Top)
		}
		if out.Rank == nil || out.Rank.Rank != 11 || out.Rank.Score != 10 || out.Missing != nil {
			t.Errorf("rank %+v missing %+v", out.Rank, out.Missing)
		}
		if ids(out.AroundMe) != "p12:9 p11:10 p10:11 p09:12 p08:13" {
			t.Errorf("aroundMe %s", ids(out.AroundMe))
		}
		if ids(out.Edge) != "p20:1 p19:2 p18:3 p17:4 p16:5" {
			t.Errorf("aroundMe at the top edge must be filled in below: %s", ids(out.Edge))
		}
		if ids(out.Friends) != "p15:6 p03:18 p01:20" {
			t.Errorf("friends %s", ids(out.Friends))
		}
		if len(out.Daily) != 10 {
			t.Errorf("every window is written: daily top has %d", len(out.Daily))
		}
		// A past period is readable (empty here: nothing was submitted then); a malformed one is bad input.
		var past struct{ Top []entry }
		s.must(t, "", `{ top(board: "reads", window: DAILY, period: "2020-02-29") { playerId } }`, nil, &past)
		if len(past.Top) != 0 {
			t.Errorf("past period %+v", past.Top)
		}
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "reads", window: DAILY, period: "2020-02-30") { playerId } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "reads", window: WEEKLY) { playerId } }`, nil)
	})

	t.Run("removePlayer", func(t *testing.T) {
		s.create(t, map[string]any{"id": "rm"})
		s.submit(t, map[string]any{"board": "rm", "playerId": "a", "score": 2})
		s.submit(t, map[string]any{"board": "rm", "playerId": "b", "score": 1})
		var out struct{ RemovePlayer bool }
		s.must(t, testAdminKey, `mutation { removePlayer(board: "rm", playerId: "a") }`, nil, &out)
		if !out.RemovePlayer {
			t.Fatal("removePlayer of a player with a score must be true")
		}
		s.must(t, testAdminKey, `mutation { removePlayer(board: "rm", playerId: "a") }`, nil, &out)
		if out.RemovePlayer {
			t.Fatal("removePlayer of a player without a score must be false")
		}
		if got := ids(s.top(t, "rm", 10)); got != "b:1" {
			t.Fatalf("after removal: %s", got)
		}
	})

	t.Run("exactTop", func(t *testing.T) {
		s.create(t, map[string]any{"id": "tail", "exactTop": 3})
		var items []map[string]any
		for i := 1; i <= 10; i++ {
			items = append(items, map[string]any{"board": "tail", "playerId": fmt.Sprintf("p%02d", i), "score": i * 100})
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { rank } } }`,
			map[string]any{"in": items}, nil)
		var out struct {
			Exact, Tail *entry
			Top         []entry
			Leaderboard struct{ ExactTop *int }
		}
		s.must(t, "", `{ exact: rank(board: "tail", playerId: "p09") { rank approximate }
			tail: rank(board: "tail", playerId: "p02") { rank approximate score }
			top(board: "tail", first: 10) { playerId }
			leaderboard(id: "tail") { exactTop } }`, nil, &out)
		if out.Exact.Rank != 2 || out.Exact.Approximate {
			t.Errorf("exact tier %+v", out.Exact)
		}
		if !out.Tail.Approximate || out.Tail.Score != 200 || out.Tail.Rank < 4 || out.Tail.Rank > 10 {
			t.Errorf("tail %+v", out.Tail)
		}
		if len(out.Top) != 3 || out.Leaderboard.ExactTop == nil || *out.Leaderboard.ExactTop != 3 {
			t.Errorf("top of an exactTop board lists the exact tier: %+v %+v", out.Top, out.Leaderboard)
		}
	})
}

func TestAPI(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	coreSuite(t, s)
}

// TestAPICluster runs the core suite on the shared 3-primary Redis Cluster (REDIS_CLUSTER_ADDRS).
func TestAPICluster(t *testing.T) {
	t.Parallel()
	if v, _ := strconv.ParseBool(os.Getenv(redistest.NoClusterEnv)); v {
		t.Skipf("%s is set", redistest.NoClusterEnv)
	}
	cfg := testConfig(t)
	cfg.RedisURL = ""
	cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
	s := startServer(t, cfg)
	if _, ok := s.App.rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("REDIS_CLUSTER_ADDRS set, but the server's client is a %T", s.App.rdb)
	}
	coreSuite(t, s)
}

// TestEmbeddedStore runs the core suite on the embedded in-memory Redis that serves when no Redis is configured.
func TestEmbeddedStore(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.RedisURL = ""
	s := startServer(t, cfg)
	if s.App.embedded == nil {
		t.Fatal("no Redis configured, but the embedded store did not start")
	}
	coreSuite(t, s)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "e", "minScore": 0, "maxScore": 1000})

	t.Run("not found", func(t *testing.T) {
		for _, q := range []string{
			`{ top(board: "nope") { rank } }`,
			`{ rank(board: "nope", playerId: "p") { rank } }`,
			`{ aroundMe(board: "nope", playerId: "p") { rank } }`,
			`{ friends(board: "nope", playerId: "p", friendIds: []) { rank } }`,
		} {
			s.wantCode(t, "", "NOT_FOUND", q, nil)
		}
		s.wantCode(t, testSubmitKey, "NOT_FOUND", `mutation { submitScore(input: {board: "nope", playerId: "p", score: 1}) { updated } }`, nil)
		s.wantCode(t, testAdminKey, "NOT_FOUND", `mutation { removePlayer(board: "nope", playerId: "p") }`, nil)
		var out struct{ Leaderboard *struct{ ID string } }
		s.must(t, "", `{ leaderboard(id: "nope") { id } }`, nil, &out)
		if out.Leaderboard != nil {
			t.Fatal("leaderboard of an unknown id must be null")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		long := strings.Repeat("x", 129)
		bigMeta := map[string]any{"blob": strings.Repeat("y", 1100)}
		sub := func(in map[string]any) {
			t.Helper()
			in["board"] = "e"
			if _, ok := in["playerId"]; !ok {
				in["playerId"] = "p"
			}
			if _, ok := in["score"]; !ok {
				in["score"] = 1
			}
			t.Logf("input %v", in)
			s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", submitMutation, map[string]any{"in": in})
		}
		sub(map[string]any{"score": 1e300})
		sub(map[string]any{"score": 9007199254740993.0 * 2})
		sub(map[string]any{"score": -1})   // below minScore
		sub(map[string]any{"score": 1001}) // above maxScore
		sub(map[string]any{"playerId": ""})
		sub(map[string]any{"playerId": long})
		sub(map[string]any{"eventId": long})
		sub(map[string]any{"displayName": long})
		sub(map[string]any{"metadata": bigMeta})
		sub(map[string]any{"metadata": "not an object"})
		sub(map[string]any{"metadata": []any{1, 2}})
		sub(map[string]any{"achievedAt": "yesterday"})
		sub(map[string]any{"achievedAt": time.Now().Add(time.Hour).Format(time.RFC3339)})
		sub(map[string]any{"score": "12"})

		bad := []map[string]any{
			{"id": ""}, {"id": long}, {"id": "b", "timezone": "Mars/Olympus"}, {"id": "b", "timezone": ""},
			{"id": "b", "windows": []string{}}, {"id": "b", "windows": []string{"DAILY", "DAILY"}},
			{"id": "b", "windows": []string{"HOURLY"}}, {"id": "b", "exactTop": 0}, {"id": "b", "exactTop": -5},
			{"id": "b", "minScore": 10, "maxScore": 1}, {"id": "b", "order": "UP"}, {"id": "b", "title": strings.Repeat("t", 300)},
		}
		for _, in := range bad {
			s.wantCode(t, testAdminKey, "BAD_USER_INPUT", createMutation, map[string]any{"in": in})
		}
		var out struct{ Leaderboards []struct{ ID string } }
		s.must(t, "", `{ leaderboards { id } }`, nil, &out)
		if len(out.Leaderboards) != 1 {
			t.Fatalf("rejected definitions must change nothing: %+v", out.Leaderboards)
		}
		if got := s.top(t, "e", 10); len(got) != 0 {
			t.Fatalf("rejected scores must change nothing: %+v", got)
		}
	})

	t.Run("limits", func(t *testing.T) {
		many := make([]string, 1001)
		for i := range many {
			many[i] = fmt.Sprint(i)
		}
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", first: 1001) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", first: -1) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", offset: -1) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ aroundMe(board: "e", playerId: "p", radius: 101) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `query($f: [ID!]!) { friends(board: "e", playerId: "p", friendIds: $f) { rank } }`,
			map[string]any{"f": many})
		items := make([]map[string]any, 1001)
		for i := range items {
			items[i] = map[string]any{"board": "e", "playerId": fmt.Sprint(i), "score": 1}
		}
		s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": items})
		// Depth: the schema has no recursion, but introspection does.
		deep := `{ __schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } } } } } } }`
		s.wantCode(t, "", "BAD_USER_INPUT", deep, nil)
		// Complexity: many aliases of a large page.
		var b strings.Builder
		b.WriteString("{")
		for i := range 20 {
			fmt.Fprintf(&b, ` t%d: top(board: "e", first: 1000) { playerId rank score topPercent }`, i)
		}
		b.WriteString("}")
		r := s.wantCode(t, "", "BAD_USER_INPUT", b.String(), nil)
		if r.Errors[0].Extensions["reason"] != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("complexity error %+v", r.Errors[0])
		}
		// Body size.
		huge := `{"query": "{ leaderboards { id } }", "variables": {"pad": "` + strings.Repeat("z", 2<<20) + `"}}`
		r = s.post(t, "", []byte(huge))
		if r.Status != http.StatusRequestEntityTooLarge || len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Errorf("oversized body: %+v", r)
		}
	})

	t.Run("partial failure", func(t *testing.T) {
		var out struct{ SubmitScores []*scoreResult }
		r := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId rank } duplicate } }`,
			map[string]any{"in": []map[string]any{
				{"board": "e", "playerId": "ok1", "score": 5, "eventId": "x1"},
				{"board": "nope", "playerId": "ok2", "score": 5},
				{"board": "e", "playerId": "bad", "score": 5000},
				{"board": "e", "playerId": "ok3", "score": 7},
				{"board": "e", "playerId": "ok1", "score": 5, "eventId": "x1"},
			}})
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatal(err)
		}
		res := out.SubmitScores
		if len(res) != 5 || res[0] == nil || res[1] != nil || res[2] != nil || res[3] == nil || res[4] == nil ||
			res[0].Duplicate || !res[4].Duplicate {
			t.Fatalf("results %s", r.Data)
		}
		if len(r.Errors) != 2 || fmt.Sprint(r.Errors[0].Path) != "[submitScores 1]" || r.Errors[0].Code() != "NOT_FOUND" ||
			fmt.Sprint(r.Errors[1].Path) != "[submitScores 2]" || r.Errors[1].Code() != "BAD_USER_INPUT" {
			t.Fatalf("errors %+v", r.Errors)
		}
		if got := ids(s.top(t, "e", 10)); got != "ok3:1 ok1:2" {
			t.Fatalf("the valid items are applied: %s", got)
		}
	})

	t.Run("graphql errors", func(t *testing.T) {
		r := s.do(t, "", `{ nope }`, nil)
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["reason"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("validation: %+v", r)
		}
		r = s.do(t, "", `{ top(`, nil)
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["reason"] != "GRAPHQL_PARSE_FAILED" {
			t.Errorf("parse: %+v", r)
		}
		r = s.post(t, "", []byte(`{"query": `))
		if r.Status != http.StatusBadRequest || len(r.Errors) != 1 {
			t.Errorf("undecodable body: %+v", r)
		}
		// An undecodable body is not echoed back at length.
		r = s.post(t, "", []byte(`{"query": `+strings.Repeat("x", 100_000)))
		if r.Status != http.StatusBadRequest || len(r.Errors) != 1 || len(r.Errors[0].Message) > 400 {
			t.Errorf("long undecodable body: status %d, %d errors, message of %d bytes", r.Status, len(r.Errors),
				len(r.Errors[0].Message))
		}
		req, _ := http.NewRequest(http.MethodGet, s.URL+`/graphql?query=mutation{removePlayer(board:"e",playerId:"x")}`, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		if r := doRequest(t, req); len(r.Errors) != 1 || r.Status < 400 {
			t.Errorf("mutation over GET: %+v", r)
		}
		req, _ = http.NewRequest(http.MethodGet, s.URL+`/graphql?query={leaderboards{id}}`, nil)
		if r := doRequest(t, req); len(r.Errors) != 0 || r.Status != 200 {
			t.Errorf("query over GET: %+v", r)
		}
	})
}

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

// Scores are bounded by their exact decimal value, as the client wrote it: 9007199254740993 (which a float64
// rounds to 2^53) is refused in variables and in literals, 2^53 itself is accepted, and a refusal writes nothing.
func TestScoreDecimals(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "dec", "mode": "LATEST"})
	viaVariables := func(score string) gqlResponse {
		body := `{"query":"mutation($in: ScoreInput!) { submitScore(input: $in) { updated entry { score } } }",` +
			`"variables":{"in":{"board":"dec","playerId":"v","score":` + score + `}}}`
		return s.post(t, testSubmitKey, []byte(body))
	}
	viaLiteral := func(score string) gqlResponse {
		return s.do(t, testSubmitKey, `mutation { submitScore(input: {board: "dec", playerId: "l", score: `+score+`}) {
			updated entry { score } } }`, nil)
	}
	for _, score := range []string{"9007199254740993", "-9007199254740993", "9007199254740993.0", "9.007199254740993e15",
		"9007199254740992.000001", "90071992547409921e-1", "1e400", "-1e17"} {
		for name, send := range map[string]func(string) gqlResponse{"variables": viaVariables, "literal": viaLiteral} {
			r := send(score)
			if len(r.Errors) == 0 || slices.ContainsFunc(r.Codes(), func(c string) bool { return c != "BAD_USER_INPUT" }) {
				t.Fatalf("%s score %s: status %d errors %+v data %s", name, score, r.Status, r.Errors, r.Data)
			}
		}
	}
	if r := s.do(t, testAdminKey, `mutation { createLeaderboard(input: {id: "dec2", maxScore: 9007199254740993.0}) { id } }`,
		nil); len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
		t.Fatalf("maxScore literal above 2^53: %+v", r.Errors)
	}
	if got := s.top(t, "dec", 10); len(got) != 0 {
		t.Fatalf("refused scores were written: %+v", got)
	}
	for name, send := range map[string]func(string) gqlResponse{"variables": viaVariables, "literal": viaLiteral} {
		for _, score := range []string{"9007199254740992", "-9.007199254740992e15", "9007199254740991.9999"} {
			if r := send(score); len(r.Errors) != 0 {
				t.Fatalf("%s score %s: %+v", name, score, r.Errors)
			}
		}
	}
	got := s.top(t, "dec", 10)
	if len(got) != 2 || got[0].Score != 1<<53 || got[1].Score != 1<<53 {
		t.Fatalf("top after the accepted scores: %+v", got)
	}
}
