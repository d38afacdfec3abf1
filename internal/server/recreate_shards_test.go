package server

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// A board deleted and created again with another shard count through one server, read through a second server
// that had its definition cached: top, rank, aroundMe, friends and size there answer as the first server does.
// A server whose cached definition was of one shard read the re-created sharded board on shard 0 alone (its
// script found the definition changed, reloaded it and ran the same unsharded read again), so `top` listed a
// third of the players with a third of the size, and live lists built on those reads followed; the other way
// (sharded cached, one shard now) a read answered INTERNAL.
func TestRecreatedWithOtherShardsReadElsewhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a := startServer(t, cfg)
	b := startServer(t, cfg)
	const read = `query($b: ID!, $p: ID!) { top(board: $b, first: 20) { playerId rank score }
		rank(board: $b, playerId: $p) { playerId rank score }
		aroundMe(board: $b, playerId: $p, radius: 2) { playerId rank }
		friends(board: $b, playerId: $p, friendIds: ["p0", "p1", "p2", "p3"]) { playerId rank }
		leaderboard(id: $b) { size } }`
	for _, step := range []struct {
		id       string
		from, to int
	}{{"flip1", 1, 3}, {"flip2", 3, 1}, {"flip3", 2, 5}} {
		a.create(t, map[string]any{"id": step.id, "shards": step.from})
		a.submit(t, map[string]any{"board": step.id, "playerId": "old", "score": 1})
		vars := map[string]any{"b": step.id, "p": "old"}
		b.must(t, "", read, vars, nil) // b caches the definition
		a.must(t, testAdminKey, deleteMutation, map[string]any{"id": step.id}, nil)
		a.create(t, map[string]any{"id": step.id, "shards": step.to})
		players := map[int]bool{}
		for i := 0; i < 12 || len(players) < step.to; i++ {
			p := fmt.Sprintf("p%d", i)
			players[leaderboard.ShardOf(p, step.to)] = true
			a.submit(t, map[string]any{"board": step.id, "playerId": p, "score": float64(i)})
		}
		vars["p"] = "p5"
		for _, q := range []string{read, `query($b: ID!) { leaderboard(id: $b) { size } }`} {
			want, got := a.do(t, "", q, vars), b.do(t, "", q, vars)
			if len(want.Errors) > 0 {
				t.Fatalf("%s: through the server that re-created it: %+v", step.id, want.Errors)
			}
			if len(got.Errors) > 0 || string(got.Data) != string(want.Data) {
				w, _ := json.Marshal(want.Data)
				t.Fatalf("%s (%d -> %d shards) through the other server:\n got  %s %+v\n want %s", step.id,
					step.from, step.to, got.Data, got.Errors, w)
			}
		}
	}
}
