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
			for sc := -1.0; sc <= 10; sc++ {
				var ge, gt int64
				for _, m := range model {
					if m.score >= sc {
						ge++
					}
					if m.score > sc {
						gt++
					}
				}
				e, err := s.RankForScore(ctx, View{Board: b.ID}, sc)
				if err != nil || e.Rank != ge+1 || e.TieRank != gt+1 || e.Size != int64(len(ids)) {
					t.Fatalf("rank for %v: %+v %v want %d/%d", sc, e, err, ge+1, gt+1)
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

func TestShardCloseSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "shc", Shards: 5, Windows: []Window{Daily}, CloseEventTop: 7})
			if err != nil {
				t.Fatal(err)
			}
			var subs []Submission
			for i := 0; i < 40; i++ {
				subs = append(subs, Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 4)})
			}
			if _, err := s.SubmitMany(ctx, subs); err != nil {
				t.Fatal(err)
			}
			period := periodKey(Daily, periodStart(Daily, now, time.UTC))
			want, err := s.Top(ctx, View{Board: b.ID, Window: Daily, Period: period}, 0, 7)
			if err != nil {
				t.Fatal(err)
			}
			id, rec, err := s.RecordClose(ctx, b.ID, Daily, period, now)
			if err != nil || !rec || id == "" {
				t.Fatalf("close: %q %v %v", id, rec, err)
			}
			evs, err := s.Closes(ctx, b.ID, "0", 10)
			if err != nil || len(evs) != 1 {
				t.Fatalf("closes %v %v", evs, err)
			}
			if evs[0].Size != 40 || len(evs[0].Top) != 7 {
				t.Fatalf("event %+v", evs[0])
			}
			for i, e := range evs[0].Top {
				w := want.Entries[i]
				if e.PlayerID != w.PlayerID || e.Rank != w.Rank || e.TieRank != w.TieRank || e.Score != w.Score {
					t.Fatalf("top %d: %+v want %+v", i, e, w)
				}
			}
			// Every shard is fenced: a score for the closed period is refused on each.
			for i := 0; i < 40; i++ {
				_, err := s.Submit(ctx, Submission{Board: b.ID, Player: fmt.Sprintf("q%d", i), Score: 9})
				if ErrorCode(err) != PeriodClosed {
					t.Fatalf("q%d (shard %d): %v", i, ShardOf(fmt.Sprintf("q%d", i), 5), err)
				}
			}
			ps, err := s.Periods(ctx, b.ID, Daily)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Period == period && p.Size != 40 {
					t.Fatalf("periods: %+v", ps)
				}
			}
			id2, rec2, err := s.RecordClose(ctx, b.ID, Daily, period, now)
			if err != nil || rec2 || id2 != id {
				t.Fatalf("second close: %q %v %v", id2, rec2, err)
			}
		})
	}
}
