package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedLiveAcrossShards: on a board of 3 shards (plain, and LATEST with exactTop 2, whose tiers a drop leaves
// short), a rankUpdates watch of a player on one shard follows players of the other shards that pass it, tie it
// later, drop below it and are removed from the top; a topUpdates list rebuilt from its diffs ends at what the
// store reads; top, rank and aroundMe (at the first and the last place) say the same.
func TestShardedLiveAcrossShards(t *testing.T) {
	t.Parallel()
	cfg := shardedConfig(t)
	s := startServer(t, cfg)
	// One player on each shard: me on shard 0, r1 on 1, r2 on 2.
	var ps [3]string
	for i := 0; ps[0] == "" || ps[1] == "" || ps[2] == ""; i++ {
		p := "lp" + strconv.Itoa(i)
		if k := leaderboard.ShardOf(p, 3); ps[k] == "" {
			ps[k] = p
		}
	}
	me, r1, r2 := ps[0], ps[1], ps[2]
	for _, in := range []map[string]any{
		{"id": "live-sh", "shards": 3},
		{"id": "live-shx", "shards": 3, "mode": "LATEST", "exactTop": 2},
	} {
		board := in["id"].(string)
		t.Run(board, func(t *testing.T) {
			s.create(t, in)
			conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			lists := map[string]*liveList{"top": {first: 5}}
			pump(t, conn, lists)
			if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": board, "n": 5}); err != nil {
				t.Fatal(err)
			}
			rankConn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			if err := rankConn.Subscribe("me", `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) {
				playerId rank tieRank approximate score } }`, map[string]any{"b": board, "p": me}); err != nil {
				t.Fatal(err)
			}
			// step applies a change, then waits for me's watch to report rank (tie, approximate), the live list to
			// equal the store's top, and checks the reads of me against the same.
			step := func(what string, change func(), rank, tie int, approx bool, score float64) {
				t.Helper()
				change()
				ctx := ctxT(t, 10*time.Second)
				for { // rank updates are coalesced: read until the settled entry
					var u struct {
						RankUpdates *entry `json:"rankUpdates"`
					}
					rankConn.NextData(t, ctx, "me", &u)
					if e := u.RankUpdates; e != nil && e.Rank == rank && e.TieRank == tie && e.Approximate == approx &&
						e.Score == score {
						break
					}
				}
				waitLive(t, s, lists["top"], board, 5*time.Second)
				var out struct {
					Rank     *entry
					AroundMe []entry
				}
				s.must(t, "", `query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { `+entryFields+` }
					aroundMe(board: $b, playerId: $p, radius: 1) { `+entryFields+` } }`,
					map[string]any{"b": board, "p": me}, &out)
				if out.Rank == nil || out.Rank.Rank != rank || out.Rank.TieRank != tie || out.Rank.Approximate != approx {
					t.Fatalf("%s: rank(%s) = %+v, want rank %d tieRank %d approximate %v", what, me, out.Rank, rank,
						tie, approx)
				}
				found := false
				for i, e := range out.AroundMe {
					found = found || e.PlayerID == me
					if i > 0 && e.Rank != out.AroundMe[i-1].Rank+1 {
						t.Fatalf("%s: aroundMe(%s): %+v", what, me, out.AroundMe)
					}
				}
				if !found {
					t.Fatalf("%s: aroundMe(%s) without it: %+v", what, me, out.AroundMe)
				}
			}
			submit := func(p string, x float64) func() {
				return func() { s.submit(t, map[string]any{"board": board, "playerId": p, "score": x}) }
			}
			remove := func(p string) func() {
				return func() {
					var out struct{ RemovePlayer bool }
					s.must(t, testAdminKey, `mutation($b: ID!, $p: ID!) { removePlayer(board: $b, playerId: $p) }`,
						map[string]any{"b": board, "p": p}, &out)
					if !out.RemovePlayer {
						t.Fatalf("removePlayer(%s) = false", p)
					}
				}
			}
			x := in["exactTop"] != nil // rank 3 is beyond exactTop 2: estimated
			step("me alone", submit(me, 10), 1, 1, false, 10)
			step("r1 passes me", submit(r1, 20), 2, 2, false, 10)
			step("r2 passes me", submit(r2, 15), 3, 3, x, 10)
			step("the top removed", remove(r1), 2, 2, false, 10)
			if x {
				// r2 drops below me; me drops below r2; r1 comes back above both.
				step("r2 drops", submit(r2, 5), 1, 1, false, 10)
				step("me drops", submit(me, 4), 2, 2, false, 4)
				step("r1 back on top", submit(r1, 30), 3, 3, true, 4)
			} else {
				// r1 ties me, a later arrival: me keeps its place (no update to wait for), r1 is after it.
				submit(r1, 10)()
				step("r2 removed", remove(r2), 1, 1, false, 10)
				step("r1 passes me", submit(r1, 11), 2, 2, false, 10)
			}
			for _, e := range s.top(t, board, 10) {
				t.Logf("%s final top: %+v", board, e)
			}
		})
	}
}

// TestShardedLiveExactTierGap: a LATEST board of 2 shards with exactTop 2 whose shard A's best drops into A's tail
// while A's tail holds a player better than shard B's: the live top list (rebuilt from its diffs) ends at the
// store's top, which lists the board's exact tier only (A's 9), and B's best is estimated third everywhere
// (rank, aroundMe, its rankUpdates watch).
func TestShardedLiveExactTierGap(t *testing.T) {
	t.Parallel()
	cfg := shardedConfig(t)
	s := startServer(t, cfg)
	const board = "live-gap"
	s.create(t, map[string]any{"id": board, "shards": 2, "mode": "LATEST", "exactTop": 2})
	var a, b []string
	for i := 0; len(a) < 3 || len(b) < 2; i++ {
		p := "gp" + strconv.Itoa(i)
		if leaderboard.ShardOf(p, 2) == 0 {
			a = append(a, p)
		} else {
			b = append(b, p)
		}
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	lists := map[string]*liveList{"top": {first: 5}}
	pump(t, conn, lists)
	if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": board, "n": 5}); err != nil {
		t.Fatal(err)
	}
	rankConn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := rankConn.Subscribe("b0", `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) {
		playerId rank approximate score } }`, map[string]any{"b": board, "p": b[0]}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		p string
		x float64
	}{{a[0], 10}, {a[1], 9}, {a[2], 8}, {b[0], 7}, {b[1], 6}, {a[0], 1}} {
		s.submit(t, map[string]any{"board": board, "playerId": w.p, "score": w.x})
		waitLive(t, s, lists["top"], board, 5*time.Second)
	}
	if top := s.top(t, board, 5); len(top) != 1 || top[0].PlayerID != a[1] || top[0].Rank != 1 {
		t.Fatalf("top %+v, want %s alone (the board's exact tier ends before shard A's tail)", top, a[1])
	}
	ctx := ctxT(t, 10*time.Second)
	for {
		var u struct {
			RankUpdates *entry `json:"rankUpdates"`
		}
		rankConn.NextData(t, ctx, "b0", &u)
		if e := u.RankUpdates; e != nil && e.Rank == 3 && e.Approximate && e.Score == 7 {
			break
		}
	}
	var out struct {
		Rank     *entry
		AroundMe []entry
	}
	s.must(t, "", `query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { `+entryFields+` }
		aroundMe(board: $b, playerId: $p, radius: 2) { `+entryFields+` } }`, map[string]any{"b": board, "p": b[0]}, &out)
	if out.Rank == nil || out.Rank.Rank != 3 || !out.Rank.Approximate || len(out.AroundMe) != 1 ||
		out.AroundMe[0].Rank != 3 || !out.AroundMe[0].Approximate {
		t.Fatalf("rank %+v, aroundMe %+v; want rank 3, estimated, alone", out.Rank, out.AroundMe)
	}
}
