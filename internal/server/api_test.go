package server

import (
	"encoding/json"
	"fmt"
	"os"
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
	TieRank     int             `json:"tieRank"`
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

const entryFields = `playerId displayName rank tieRank approximate score topPercent updatedAt metadata`

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
