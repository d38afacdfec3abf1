package ledger_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redisinfo"
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

// BenchmarkRestore measures a restore from the ledger: a board of one player an event, scores with heavy ties,
// rebuilt b.N times. It reports Redis's CPU (INFO cpu: the process's user and system time, which a busy machine
// does not inflate as it does commandstats' wall-clock µs) and the wall time per event. The board is written
// two ways: fill=bulk, LB_BENCH_EVENTS events (default 100,000) in calls of 1,000 (each call one recording), and
// fill=single, LB_BENCH_SINGLE_EVENTS (default 20,000) one a call, as game servers send them, each a recording
// of its own at a clock one millisecond on. LB_BENCH_RATE sets Config.RestoreRate (default: the store's).
func BenchmarkRestore(b *testing.B) {
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v != 0 {
			return v
		}
		return def
	}
	for _, fill := range []struct {
		name       string
		n, perCall int
	}{{"bulk", envInt("LB_BENCH_EVENTS", 100_000), 1000}, {"single", envInt("LB_BENCH_SINGLE_EVENTS", 20_000), 1}} {
		b.Run("fill="+fill.name, func(b *testing.B) {
			benchRestore(b, fill.n, fill.perCall, float64(envInt("LB_BENCH_RATE", 0)))
		})
	}
}

func benchRestore(b *testing.B, n, perCall int, rate float64) {
	rdb := redistest.Standalone(b).Client(b)
	lg, err := openBench(b)
	if err != nil {
		b.Fatal(err)
	}
	var tick atomic.Int64
	t0 := time.Now()
	clock := func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	s := leaderboard.New(rdb, leaderboard.Config{Prefix: "br", Ledger: lg, PublishCommand: leaderboard.PublishNone,
		RestoreRate: rate, Clock: clock})
	ctx := context.Background()
	id := fmt.Sprintf("restore-%d", time.Now().UnixNano())
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += perCall {
		subs := make([]leaderboard.Submission, 0, perCall)
		for k := i; k < min(i+perCall, n); k++ {
			subs = append(subs, leaderboard.Submission{Board: id, Player: fmt.Sprintf("p%d", k), Score: float64(k % 997)})
		}
		submitAll(ctx, b, s, subs)
	}
	cpu := func() float64 {
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		u, _ := redisinfo.Field(info, "used_cpu_user")
		sy, _ := redisinfo.Field(info, "used_cpu_sys")
		fu, _ := strconv.ParseFloat(u, 64)
		fs, _ := strconv.ParseFloat(sy, 64)
		return fu + fs
	}
	c0 := cpu()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Rebuild(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	events := float64(b.N * (n + 1))
	b.ReportMetric((cpu()-c0)*1e6/events, "redis-cpu-us/event")
	b.ReportMetric(float64(time.Since(start).Microseconds())/events, "wall-us/event")
}
