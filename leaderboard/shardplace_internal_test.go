package leaderboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// TestPlaceOnMatchesScript holds the plain count of placeOn to shardnear.lua's (nearOn) on a sharded board of
// either order: probes at every score of a shard's players and between them, with tokens before, among and after
// the score's players (”, '+', and the tokens of players on another shard), where scores are shared by a few
// players of a shard (the plain count reads their members, and calls no script) and where one score is shared by
// more than placeEqualMax (the script answers) .
func TestPlaceOnMatchesScript(t *testing.T) {
	ctx := context.Background()
	srv := redistest.SharedStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	scripts := &scriptCalls{sc: shardNearScript}
	rdb.AddHook(redistest.Commands{See: scripts.see})
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	s := New(rdb, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
	for _, order := range []Order{Desc, Asc} {
		b, err := s.CreateBoard(ctx, Board{ID: "place-" + string(order), Shards: 3, Order: order})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		var subs []Submission
		for i := range 900 {
			score := float64(rng.IntN(40)) // about 20 players a score, 7 on a shard
			switch {
			case i%9 == 0:
				score = 100 // 100 players: over placeEqualMax on a shard
			case i%13 == 0:
				score = 1000 + float64(i) + 0.5 // alone
			}
			subs = append(subs, Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: score})
		}
		for i := 0; i < len(subs); i += 100 {
			if _, err := s.SubmitMany(ctx, subs[i:i+100]); err != nil {
				t.Fatal(err)
			}
		}
		v, err := s.loadBoard(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The players of shard 0, in order: their places to count on the others.
		near, err := s.nearOn(ctx, v, AllTime, "all", 0, [][]shardProbe{{{x: "-inf", na: 900}}, nil, nil})
		if err != nil {
			t.Fatal(err)
		}
		rows := near[0].probes[0].after
		if len(rows) < 250 {
			t.Fatalf("shard 0 lists %d players", len(rows))
		}
		crowded := b.internal(100)
		for _, set := range []struct {
			name   string
			many   bool // probes at the crowded score: the script answers
			probes [][]shardProbe
		}{{name: "few"}, {name: "many", many: true}} {
			probes := make([][]shardProbe, 3)
			probes[0] = []shardProbe{} // its size only
			for k := 1; k < 3; k++ {
				probes[k] = append(probes[k], shardProbe{x: "-inf"})
				for _, r := range rows {
					if (r.xs == crowded) == set.many {
						probes[k] = append(probes[k], shardProbe{x: r.xs, tok: r.tok}, shardProbe{x: r.xs},
							shardProbe{x: r.xs, tok: "+"})
					}
				}
				if !set.many {
					for x := -1.0; x < 41; x += 0.5 {
						probes[k] = append(probes[k], shardProbe{x: b.internal(x), tok: rows[rng.IntN(len(rows))].tok})
					}
				}
			}
			want, err := s.nearOn(ctx, v, AllTime, "all", 0, probes)
			if err != nil {
				t.Fatal(err)
			}
			calls := func() int { scripts.mu.Lock(); defer scripts.mu.Unlock(); return len(scripts.items) }
			before := calls()
			plain, err := s.placeOn(ctx, v, AllTime, "all", 0, probes, true)
			if err != nil {
				t.Fatal(err)
			}
			if called := calls() > before; called != set.many {
				t.Fatalf("%s %s: a script called: %v, want %v", order, set.name, called, set.many)
			}
			for k := range probes {
				if want[k].asked != plain[k].asked || want[k].size != plain[k].size ||
					len(want[k].probes) != len(plain[k].probes) {
					t.Fatalf("%s %s shard %d: plain %+v, script %+v", order, set.name, k, plain[k], want[k])
				}
				for j, w := range want[k].probes {
					if g := plain[k].probes[j]; g.ahead != w.ahead || g.better != w.better {
						t.Fatalf("%s %s shard %d probe %+v: plain ahead %d better %d, script %d %d", order, set.name,
							k, probes[k][j], g.ahead, g.better, w.ahead, w.better)
					}
				}
			}
		}
	}
}
