package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// runGrowth (issue scenario 6) measures how one client's submit and rank latency change as an ALL_TIME board
// grows from the first to the last of the growth sizes. It calls the scripts directly (Store.Submit, Store.Rank)
// so that the figures show Redis's work, which is where the board size matters. Submissions go to existing
// players with random scores (a BEST board: about half of them are improvements and move the player), so the
// board keeps its size during a step.
func runGrowth(ctx context.Context, e *env) ([]*table, error) {
	sz := e.sizes()
	t := &table{title: "6. Growth: one client's latency as the board grows (Store.Submit / Store.Rank, the scripts)",
		head: []string{"players", "submit/s", "submit p50", "submit p99", "rank/s", "rank p50", "rank p99", "errors"}}
	const board = "growth"
	view := leaderboard.View{Board: board}
	for _, n := range sz.GrowthSizes {
		if err := e.ensureBoard(ctx, board, n, 0); err != nil {
			return []*table{t}, err
		}
		var subs, ranks []Sample
		for r := 0; r < e.o.Runs; r++ {
			subs = append(subs, e.step(ctx, e.stepOf(1), func(ctx context.Context, w int, i int64) error {
				_, err := e.store.Submit(ctx, leaderboard.Submission{Board: board, Player: fixturePlayer(rand.IntN(n)),
					Score: float64(rand.IntN(1_000_003))})
				return err
			}))
			ranks = append(ranks, e.step(ctx, e.stepOf(1), func(ctx context.Context, w int, i int64) error {
				en, err := e.store.Rank(ctx, view, fixturePlayer(rand.IntN(n)))
				if err == nil && en == nil {
					err = fmt.Errorf("rank: player missing")
				}
				return err
			}))
		}
		s, rk := medianSample(subs), medianSample(ranks)
		errs := s
		errs.Errs += rk.Errs
		if errs.FirstErr == "" {
			errs.FirstErr = rk.FirstErr
		}
		t.add(fmt.Sprint(n), fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99), fmtRate(rk.Rate), fmtDur(rk.P50),
			fmtDur(rk.P99), fmtErrs(errs))
	}
	return []*table{t}, nil
}
