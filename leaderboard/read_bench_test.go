package leaderboard_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// BenchmarkReadScript measures what the read scripts cost Redis on a big board (LB_BENCH_PLAYERS players, default
// 100,000; lbbench's reads use 1,000,000): Redis's microseconds per read (INFO commandstats' FCALL usec) as
// redis-us/op, and the part of it spent in each command the script calls (HGET, ZRANK, ...) as <cmd>-us/op; the
// rest is the script's Lua and its calls into Redis. Reads come from LB_BENCH_WORKERS goroutines (default 64), one
// script call each (no batcher), and fill only what lbbench's queries ask for (no optional Fields); the players are
// lbbench's fixture (player-0 ... player-(n-1)), random per read. LB_BENCH_REDIS, LB_BENCH_BEFORE and
// LB_BENCH_AFTER: see BenchmarkSubmitScript; on LB_BENCH_REDIS the board (key prefix "readbench") is kept, and a
// later run loads only the players it lacks.
func BenchmarkReadScript(b *testing.B) {
	rdb, ap := benchClients(b)
	players := envInt("LB_BENCH_PLAYERS", 100_000)
	workers := envInt("LB_BENCH_WORKERS", 64)
	ctx := context.Background()
	// A fixed prefix: on LB_BENCH_REDIS a later run finds the board loaded.
	s := lb.New(ap, lb.Config{Prefix: "readbench"})
	v := lb.View{Board: "big"}
	if _, err := s.CreateBoard(ctx, lb.Board{ID: "big"}); err != nil && lb.ErrorCode(err) != lb.Conflict {
		b.Fatal(err)
	}
	have, err := s.Size(ctx, v)
	if err != nil {
		b.Fatal(err)
	}
	player := func(i int) string { return "player-" + strconv.Itoa(i) }
	var next atomic.Int64
	next.Store(have)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(1000)) - 1000
				if from >= players {
					return
				}
				subs := make([]lb.Submission, 0, 1000)
				for i := from; i < min(from+1000, players); i++ {
					subs = append(subs, lb.Submission{Board: "big", Player: player(i), Score: float64(i * 7 % 1_000_003)})
				}
				if _, err := s.SubmitMany(ctx, subs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The fields lbbench's queries ask for (playerId rank score [topPercent]): none of the optional ones.
	only := lb.Only(0)
	reads := []struct {
		name string
		read func() error
	}{
		{"friends=100", func() error {
			ids := make([]string, 100)
			for k := range ids {
				ids[k] = player(rand.IntN(players))
			}
			es, err := s.Friends(ctx, v, player(rand.IntN(players)), ids, only)
			if err == nil && len(es) < 50 { // every fixture player has a score; repeated ids count once
				err = fmt.Errorf("friends: %d entries", len(es))
			}
			return err
		}},
		{"rank", func() error {
			e, err := s.Rank(ctx, v, player(rand.IntN(players)), only)
			if err == nil && e == nil {
				err = errors.New("rank: player missing")
			}
			return err
		}},
		{"around=5", func() error {
			es, err := s.Around(ctx, v, player(rand.IntN(players)), 5, only)
			if err == nil && len(es) < 6 {
				err = fmt.Errorf("around: %d entries", len(es))
			}
			return err
		}},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			benchMark(b, "LB_BENCH_BEFORE")
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if err := r.read(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			benchMark(b, "LB_BENCH_AFTER")
			stats := commandStats(b, rdb)
			b.ReportMetric((stats["fcall"].Usec+stats["fcall_ro"].Usec)/float64(b.N), "redis-us/op")
			for _, c := range []string{"hget", "hmget", "zrank", "zmscore", "zscore", "zrange", "zcount"} {
				if st, ok := stats[c]; ok {
					b.ReportMetric(st.Usec/float64(b.N), c+"-us/op")
				}
			}
		})
	}
}

// benchClients returns a client of LB_BENCH_REDIS (or of a private Redis started for b) and an AutoPipeliner on
// it, which the scripts' benchmarks run their store on: many calls in flight, as the server's batcher keeps them.
func benchClients(b *testing.B) (*redis.Client, *redis.AutoPipeliner) {
	addr := os.Getenv("LB_BENCH_REDIS")
	if addr == "" {
		addr = redistest.Standalone(b).Options().Addrs[0]
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8})
	b.Cleanup(func() { rdb.Close() })
	ap, err := rdb.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	return rdb, ap
}

// commandStats reads INFO commandstats (redisinfo.CommandStats).
func commandStats(b *testing.B, rdb *redis.Client) map[string]redisinfo.CommandStat {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	return redisinfo.CommandStats(info)
}
