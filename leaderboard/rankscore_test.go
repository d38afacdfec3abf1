package leaderboard_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// RankForScore against the model, DESC and ASC, exact and exactTop boards with many ties: the rank is 1 + the
// players with an equal or better score, tieRank 1 + those with a strictly better one, topPercent 100 * rank /
// (size + 1), and no key of the board changes. A new player who then submits the score gets that tieRank, the
// same approximate flag and, in the exact tier, that rank.
func TestRankForScoreModel(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			for _, exactTop := range []int{0, 6} {
				name := fmt.Sprintf("%s-top%d", order, exactTop)
				t.Run(name, func(t *testing.T) {
					b := mustBoard(t, s, lb.Board{ID: "rfs-" + name, Order: order, Mode: lb.Latest, ExactTop: exactTop})
					v := lb.View{Board: b.ID}
					m := newModel(order, lb.Latest)
					rng := rand.New(rand.NewPCG(7, uint64(exactTop)))
					for range 120 {
						p := fmt.Sprintf("p%02d", rng.IntN(30))
						score := float64(rng.IntN(8))
						mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: score})
						m.submit(p, score)
					}
					probes := []float64{-1, 0, 0.5, 3, 3.5, 7, 8, 100}
					before := boardDump(t, s, tg, b.ID)
					sawTail := false
					for _, x := range probes {
						est, err := s.RankForScore(ctx, v, x)
						if err != nil {
							t.Fatal(err)
						}
						var better, equal int64
						for _, y := range m.score {
							switch {
							case m.better(y, x):
								better++
							case y == x:
								equal++
							}
						}
						size := int64(len(m.score))
						if est.Rank != better+equal+1 || est.TieRank != better+1 || est.Size != size ||
							est.TopPercent != 100*float64(est.Rank)/float64(size+1) || est.Score != x ||
							est.Window != lb.AllTime || est.Period != lb.AllPeriod || est.Board != b.ID ||
							exactTop == 0 && est.Approximate {
							t.Fatalf("score %v: %+v, want rank %d tieRank %d size %d", x, est, better+equal+1, better+1,
								size)
						}
						sawTail = sawTail || est.Approximate
					}
					sameDump(t, "RankForScore", before, boardDump(t, s, tg, b.ID))
					if exactTop > 0 && !sawTail {
						t.Fatal("no probe beyond exactTop")
					}
					// A second read path: a new player submits each probe score (and is removed again).
					for i, x := range probes {
						est, err := s.RankForScore(ctx, v, x)
						if err != nil {
							t.Fatal(err)
						}
						p := fmt.Sprintf("new%d", i)
						r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: x})
						if r.Entry.TieRank != est.TieRank || r.Entry.Approximate != est.Approximate ||
							!est.Approximate && (r.Entry.Rank != est.Rank || r.Entry.TopPercent != est.TopPercent) {
							t.Fatalf("score %v: estimated %+v, submitted %+v", x, est, r.Entry)
						}
						if _, err := s.RemovePlayer(ctx, b.ID, p); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	})
}

// RankForScore checks a score as a submission would, and reads only existing boards and windows.
func TestRankForScoreInput(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "rfs-bounds", MinScore: ptr(0.0), MaxScore: ptr(1000.0)})
		v := lb.View{Board: b.ID}
		for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 1000.5, 1 << 54} {
			if _, err := s.RankForScore(ctx, v, x); lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("score %v: %v, want BAD_USER_INPUT", x, err)
			}
		}
		if _, err := s.RankForScore(ctx, lb.View{Board: b.ID, Window: lb.Daily}, 1); lb.ErrorCode(err) != lb.Invalid {
			t.Fatalf("a window the board does not keep: %v", err)
		}
		if _, err := s.RankForScore(ctx, lb.View{Board: "nope"}, 1); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("no board: %v", err)
		}
		est, err := s.RankForScore(ctx, v, 1000) // an empty board: first of one
		if err != nil || est.Rank != 1 || est.TieRank != 1 || est.Size != 0 || est.TopPercent != 100 || est.Approximate {
			t.Fatalf("empty board: %+v %v", est, err)
		}
	})
}
