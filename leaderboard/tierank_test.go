package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// modelRanks is what the model (exacttop_test.go) says of every player: fair rank (first arrival wins ties),
// competition rank (1 + players with a strictly better score) and the size of the player's tie group.
type modelRanks struct {
	order []string
	rank  map[string]int64
	tie   map[string]int64
	group map[string]int64
}

func tieModel(m *model) modelRanks {
	r := modelRanks{order: m.ranking(), rank: map[string]int64{}, tie: map[string]int64{}, group: map[string]int64{}}
	for i, p := range r.order {
		r.rank[p] = int64(i + 1)
		if i > 0 && m.score[r.order[i-1]] == m.score[p] {
			r.tie[p] = r.tie[r.order[i-1]]
		} else {
			r.tie[p] = int64(i + 1)
		}
		r.group[p] = 0
	}
	for _, p := range r.order {
		for _, q := range r.order {
			if m.score[q] == m.score[p] {
				r.group[p]++
			}
		}
	}
	return r
}

// checkEntry compares every field of an entry with the model. An exact entry has the model's rank; an estimated
// one (beyond exactTop, integer scores: every histogram bucket counts its scores one by one) a rank within the
// player's tie group. Its tieRank is the model's in both cases.
func checkTieEntry(t *testing.T, where string, m *model, mr modelRanks, size int64, e lb.Entry) {
	t.Helper()
	p := e.PlayerID
	want, ok := mr.rank[p]
	if !ok {
		t.Fatalf("%s: %s has no score in the model", where, p)
	}
	if e.Score != m.score[p] || e.TieRank != mr.tie[p] {
		t.Fatalf("%s: %s score %v tieRank %d, want %v %d", where, p, e.Score, e.TieRank, m.score[p], mr.tie[p])
	}
	if !e.Approximate && e.Rank != want {
		t.Fatalf("%s: %s exact rank %d, want %d", where, p, e.Rank, want)
	}
	if e.Approximate && (e.Rank < mr.tie[p] || e.Rank >= mr.tie[p]+mr.group[p]) {
		t.Fatalf("%s: %s estimated rank %d outside its tie group %d..%d", where, p, e.Rank, mr.tie[p],
			mr.tie[p]+mr.group[p]-1)
	}
	if e.TieRank > e.Rank {
		t.Fatalf("%s: %s tieRank %d after rank %d", where, p, e.TieRank, e.Rank)
	}
	if w := 100 * float64(e.Rank) / float64(size); e.TopPercent != w {
		t.Fatalf("%s: %s topPercent %v, want %v", where, p, e.TopPercent, w)
	}
}

// tieRank is the competition rank next to the fair rank, on every read path (top pages at every offset, rank,
// ranks, aroundMe, friends, a submission's own entry), for DESC and ASC, exact and exactTop boards, over random
// integer scores with many ties that rise and fall (LATEST) or only rise (BEST).
func TestTieRankModel(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			for _, mode := range []lb.Mode{lb.Latest, lb.Best} {
				for _, exactTop := range []int{0, 7} {
					name := fmt.Sprintf("%s-%s-top%d", order, mode, exactTop)
					t.Run(name, func(t *testing.T) {
						b := mustBoard(t, s, lb.Board{ID: "tie-" + name, Order: order, Mode: mode, ExactTop: exactTop})
						v := lb.View{Board: b.ID}
						m := newModel(order, mode)
						rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(exactTop)+1))
						const players = 40
						sawTail, sawTieAbove := false, false
						for i := range 400 {
							p := fmt.Sprintf("p%02d", rng.IntN(players))
							score := float64(rng.IntN(10) - 3)
							r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: score})
							m.submit(p, score)
							mr := tieModel(m)
							checkTieEntry(t, fmt.Sprintf("submit %d", i), m, mr, int64(len(m.score)), r.Entry)
							if r.Size != int64(len(m.score)) {
								t.Fatalf("submit %d: size %d, want %d", i, r.Size, len(m.score))
							}
							if i%50 != 49 {
								continue
							}
							size := int64(len(m.score))
							// Top, in pages of 3 from every offset: each page's first row takes its tieRank from
							// Redis, the others from the rows before them.
							all, err := s.Top(ctx, v, 0, 1000)
							if err != nil {
								t.Fatal(err)
							}
							wantLen := len(m.score)
							if exactTop > 0 {
								wantLen = min(wantLen, exactTop)
							}
							if len(all.Entries) > wantLen || exactTop == 0 && len(all.Entries) != wantLen {
								t.Fatalf("top has %d rows, want %d", len(all.Entries), wantLen)
							}
							for k, e := range all.Entries {
								if e.PlayerID != mr.order[k] || e.Approximate {
									t.Fatalf("top row %d: %+v, want %s exact", k, e, mr.order[k])
								}
								checkTieEntry(t, "top", m, mr, size, e)
							}
							for off := range len(all.Entries) {
								pg, err := s.Top(ctx, v, off, 3)
								if err != nil {
									t.Fatal(err)
								}
								for k, e := range pg.Entries {
									if !sameEntry(e, all.Entries[off+k]) {
										t.Fatalf("top page at %d row %d: %+v, want %+v", off, k, e, all.Entries[off+k])
									}
									if k == 0 && e.TieRank < e.Rank {
										sawTieAbove = true
									}
								}
							}
							// rank, ranks (friends' path) and aroundMe for every player.
							ids := make([]string, 0, len(m.score))
							for p := range m.score {
								ids = append(ids, p)
							}
							pg, err := s.Ranks(ctx, v, ids)
							if err != nil || len(pg.Entries) != len(ids) {
								t.Fatalf("Ranks: %d entries, %v", len(pg.Entries), err)
							}
							for _, e := range pg.Entries {
								checkTieEntry(t, "ranks", m, mr, size, e)
								sawTail = sawTail || e.Approximate
							}
							for _, p := range ids {
								e, err := s.Rank(ctx, v, p)
								if err != nil || e == nil {
									t.Fatalf("Rank(%s): %v %v", p, e, err)
								}
								checkTieEntry(t, "rank", m, mr, size, *e)
								around, err := s.Around(ctx, v, p, 2)
								if err != nil || len(around) == 0 {
									t.Fatalf("Around(%s): %v %v", p, around, err)
								}
								for _, a := range around {
									checkTieEntry(t, "around "+p, m, mr, size, a)
								}
							}
							fr, err := s.Friends(ctx, v, ids[0], ids[1:10])
							if err != nil || len(fr) != 10 {
								t.Fatalf("Friends: %d %v", len(fr), err)
							}
							for _, e := range fr {
								checkTieEntry(t, "friends", m, mr, size, e)
							}
						}
						if exactTop > 0 && !sawTail {
							t.Fatal("no player beyond exactTop: the estimate was not exercised")
						}
						if !sawTieAbove {
							t.Fatal("no top page started inside a tie group: the first row's count was not exercised")
						}
					})
				}
			}
		}
	})
}

func sameEntry(a, b lb.Entry) bool {
	return a.PlayerID == b.PlayerID && a.Rank == b.Rank && a.TieRank == b.TieRank && a.Score == b.Score &&
		a.Approximate == b.Approximate && a.TopPercent == b.TopPercent && a.UpdatedAt.Equal(b.UpdatedAt)
}
