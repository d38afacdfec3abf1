package server

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// shardedConfig is testConfig on the shared 3-primary cluster, where a sharded board's shards sit on different
// primaries, or on the shared standalone Redis when REDISTEST_NO_CLUSTER is set.
func shardedConfig(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(t)
	if v, _ := strconv.ParseBool(os.Getenv(redistest.NoClusterEnv)); !v {
		cfg.RedisURL = ""
		cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
	}
	return cfg
}

// TestShardedBoardGraphQL: createLeaderboard takes shards (default 1) and Leaderboard reports it; a board of 5
// shards on the shared cluster ranks through GraphQL as the same submissions rank anywhere (equal scores by first
// arrival, players of every shard), and reads back its shards from another store; shards outside 1..64 are
// BAD_USER_INPUT and create nothing; the export has every player in rank order.
func TestShardedBoardGraphQL(t *testing.T) {
	t.Parallel()
	cfg := shardedConfig(t)
	s := startServer(t, cfg)
	const create = `mutation($in: LeaderboardInput!) { createLeaderboard(input: $in) { id shards size } }`
	type board struct {
		ID     string
		Shards int
		Size   int
	}
	var out struct{ CreateLeaderboard board }
	s.must(t, testAdminKey, create, map[string]any{"in": map[string]any{"id": "spread", "shards": 5}}, &out)
	if out.CreateLeaderboard != (board{"spread", 5, 0}) {
		t.Fatalf("created %+v, want spread with 5 shards", out.CreateLeaderboard)
	}
	s.must(t, testAdminKey, create, map[string]any{"in": map[string]any{"id": "plain"}}, &out)
	if out.CreateLeaderboard.Shards != 1 {
		t.Fatalf("a board created without shards has %d, want 1", out.CreateLeaderboard.Shards)
	}
	for _, in := range []map[string]any{
		{"id": "bad-0", "shards": 0},
		{"id": "bad-65", "shards": 65},
		{"id": "bad-neg", "shards": -1},
		{"id": "bad-min", "shards": math.MinInt32},
	} {
		s.wantCode(t, testAdminKey, "BAD_USER_INPUT", create, map[string]any{"in": in})
		s.wantCode(t, "", "NOT_FOUND", `query($b: ID!) { top(board: $b) { playerId } }`,
			map[string]any{"b": in["id"]})
	}

	// Players of every shard; two ties in the order submitted.
	var want []string
	seen := map[int]bool{}
	for i := 0; len(seen) < 5 || len(want) < 12; i++ {
		p := "g" + strconv.Itoa(i)
		seen[leaderboard.ShardOf(p, 5)] = true
		want = append(want, p)
	}
	for i, p := range want {
		r := s.submit(t, map[string]any{"board": "spread", "playerId": p, "score": 100 - 10*(i/3)})
		if r.Entry.Rank != i+1 {
			t.Fatalf("%s submitted %d-th (tie group %d): rank %d", p, i+1, i/3, r.Entry.Rank)
		}
	}
	got := s.top(t, "spread", 50)
	if len(got) != len(want) {
		t.Fatalf("top: %s, want %v", ids(got), want)
	}
	for i, e := range got {
		if e.PlayerID != want[i] || e.Rank != i+1 || e.TieRank != 1+3*(i/3) || e.Score != float64(100-10*(i/3)) {
			t.Fatalf("top entry %d: %+v; want %s rank %d tieRank %d", i, e, want[i], i+1, 1+3*(i/3))
		}
	}
	var read struct{ Leaderboard board }
	s.must(t, "", `query { leaderboard(id: "spread") { id shards size } }`, nil, &read)
	if read.Leaderboard != (board{"spread", 5, len(want)}) {
		t.Fatalf("leaderboard(spread) = %+v", read.Leaderboard)
	}
	b, err := s.Store.Board(ctxT(t, 10*time.Second), "spread")
	if err != nil || b.Shards != 5 {
		t.Fatalf("the board read by another store: %+v, %v", b, err)
	}

	// The export has every player in rank order, or refuses the sharded board; never a part of it.
	resp := s.exportGet(t, "", "spread", map[string]string{"format": "ndjson"})
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		t.Logf("the export refuses the sharded board: %d %s", resp.StatusCode, body)
		return
	}
	var exported []string
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var row struct{ PlayerID string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("export: status %d, line %q: %v", resp.StatusCode, line, err)
		}
		exported = append(exported, row.PlayerID)
	}
	if !slices.Equal(exported, want) {
		t.Fatalf("export of the 5-shard board (status %d): %d rows %v, want the %d players %v", resp.StatusCode,
			len(exported), exported, len(want), want)
	}
}
