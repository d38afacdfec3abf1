package leaderboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

func TestShardSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "sh", Shards: 3})
			if err != nil {
				t.Fatal(err)
			}
			type m struct {
				score float64
				arr   int
			}
			model := map[string]*m{}
			arr := 0
			rng := rand.New(rand.NewPCG(1, 2))
			for round := 0; round < 20; round++ {
				var subs []Submission
				for i := 0; i < 50; i++ {
					p := fmt.Sprintf("p%d", rng.IntN(300))
					sc := float64(rng.IntN(10))
					subs = append(subs, Submission{Board: b.ID, Player: p, Score: sc})
				}
				out, err := s.SubmitMany(ctx, subs)
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range out {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					arr++
					cur := model[subs[i].Player]
					if cur == nil || subs[i].Score > cur.score {
						model[subs[i].Player] = &m{subs[i].Score, arr}
					}
				}
			}
			var ids []string
			for id := range model {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool {
				a, b := model[ids[i]], model[ids[j]]
				if a.score != b.score {
					return a.score > b.score
				}
				return a.arr < b.arr
			})
			p, err := s.Top(ctx, View{Board: b.ID}, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if p.Size != int64(len(ids)) || len(p.Entries) != len(ids) {
				t.Fatalf("size %d entries %d want %d", p.Size, len(p.Entries), len(ids))
			}
			for i, e := range p.Entries {
				if e.PlayerID != ids[i] || e.Rank != int64(i+1) || e.Score != model[ids[i]].score {
					t.Fatalf("row %d: %+v want %s %v", i, e, ids[i], model[ids[i]].score)
				}
				r, err := s.Rank(ctx, View{Board: b.ID}, e.PlayerID)
				if err != nil || r == nil || r.Rank != e.Rank || r.TieRank != e.TieRank {
					t.Fatalf("rank of %s: %+v %v want %d/%d", e.PlayerID, r, err, e.Rank, e.TieRank)
				}
			}
			for _, id := range []string{ids[0], ids[5], ids[len(ids)-1], ids[len(ids)/2]} {
				a, err := s.Around(ctx, View{Board: b.ID}, id, 3)
				if err != nil {
					t.Fatal(err)
				}
				r, _ := s.Rank(ctx, View{Board: b.ID}, id)
				start, stop := aroundWindow(r.Rank-1, int64(len(ids)), 3)
				if int64(len(a)) != stop-start+1 {
					t.Fatalf("around %s: %d rows want %d", id, len(a), stop-start+1)
				}
				for k, e := range a {
					want := p.Entries[start+int64(k)]
					if e.PlayerID != want.PlayerID || e.Rank != want.Rank || e.TieRank != want.TieRank {
						t.Fatalf("around %s row %d: %+v want %+v", id, k, e, want)
					}
				}
			}
			if _, err := s.DeleteBoard(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
			for _, base := range s.shardBases(b.ID, 3) {
				keys, _ := tg.Client.Keys(ctx, globEscape(base)+"*").Result()
				if len(keys) > 0 && tg.Name == "standalone" {
					t.Fatalf("left %v", keys)
				}
			}
		})
	}
}
