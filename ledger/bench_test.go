package ledger_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/ledger"
)

// BenchmarkSubmit: single submissions from 32 goroutines on one board, with the ledger and without (the same
// Redis, the same store settings).
func BenchmarkSubmit(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("ledger=%t", on), func(b *testing.B) {
			rdb := redistest.Standalone(b).Client(b)
			var l leaderboard.Ledger
			if on {
				lg, err := openBench(b)
				if err != nil {
					b.Fatal(err)
				}
				l = lg
			}
			s := leaderboard.New(rdb, leaderboard.Config{Prefix: "bn", Ledger: l, PublishCommand: leaderboard.PublishNone,
				BatchLanes: 4})
			ctx := context.Background()
			if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: "bench",
						Player: fmt.Sprintf("p%d", i%10000), Score: float64(i % 1000)}})
					if err == nil {
						err = outs[0].Err
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func openBench(b *testing.B) (*ledger.Ledger, error) {
	pg := pgtest.Shared(b)
	if os.Getenv("BENCH_FSYNC_OFF") != "" {
		pg = pgtest.Start(b, "fsync=off")
	}
	return ledger.Open(context.Background(), ledger.Config{URL: pg.Database(b)})
}
