package leaderboard_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
	lb "github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// BenchmarkSubmitScript measures what the submit script costs Redis: the microseconds per call Redis reports for
// FCALL (INFO commandstats: Redis's own time in the command, the script included) as redis-us/call, and per item
// as redis-us/item. Each sub-benchmark loads a fresh board with LB_BENCH_PLAYERS players (default 100,000), then
// measures b.N items from LB_BENCH_WORKERS goroutines (default 64) over go-redis's AutoPipeliner. The items are
// the load generator's mix (cmd/lbbench): even items bring a new player, odd ones resubmit an earlier player with
// another score. Sub-benchmarks: the board (ALL_TIME; ALL_TIME, DAILY and WEEKLY; exactTop 1000; ALL_TIME with
// replies that ask no rank; 3 shards, all on this one Redis, with and without ranks) and the items per call (1:
// submitScore; 100: a submitScores batch). fcalls/item counts every script call (a sharded board's arrival
// counter and shardnear calls too); a sharded board's plain placement commands show with LB_BENCH_COMMANDS.
//
// Timing on a shared machine moves by ±15 %; for a count that does not, run Redis under callgrind and let the
// benchmark dump its counters around the measured phase:
//
//	valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.out redis-server --port 7000 --save '' &
//	LB_BENCH_REDIS=127.0.0.1:7000 LB_BENCH_BEFORE='callgrind_control -z; callgrind_control -i on' \
//	  LB_BENCH_AFTER='callgrind_control -d; callgrind_control -i off' LB_BENCH_PLAYERS=10000 \
//	  go test ./leaderboard -run '^$' -bench 'SubmitScript/alltime/items=100' -benchtime 2000x
//	callgrind_annotate /tmp/cg.out.1 | head   # the last dump is the last measured phase
//
// LB_BENCH_REDIS names a Redis to use instead of a private one (its keys are not removed); LB_BENCH_BEFORE and
// LB_BENCH_AFTER are shell commands run right before and right after the measured phase; LB_BENCH_COMMANDS=1 also
// reports each command's microseconds per item (<cmd>-us/item: the part of redis-us/item spent in that command).
func BenchmarkSubmitScript(b *testing.B) {
	rdb, ap := benchClients(b)
	players := envInt("LB_BENCH_PLAYERS", 100_000)
	workers := envInt("LB_BENCH_WORKERS", 64)
	ctx := context.Background()
	norank := []lb.ReadOption{lb.Only(lb.FieldUpdatedAt)} // a reply without rank: a sharded board places less
	boards := []struct {
		name string
		def  lb.Board
		opts []lb.ReadOption
	}{
		{"alltime", lb.Board{}, nil},
		{"3windows", lb.Board{Windows: []lb.Window{lb.AllTime, lb.Daily, lb.Weekly}}, nil},
		{"exacttop", lb.Board{ExactTop: 1000}, nil},
		{"alltime-norank", lb.Board{}, norank},
		{"3shards", lb.Board{Shards: 3}, nil},
		{"3shards-norank", lb.Board{Shards: 3}, norank},
	}
	run := 0
	for _, bd := range boards {
		for _, per := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/items=%d", bd.name, per), func(b *testing.B) {
				run++
				s := lb.New(ap, lb.Config{Prefix: fmt.Sprintf("bench%d-%s", run, rand8())})
				def := bd.def
				def.ID = "b"
				if _, err := s.CreateBoard(ctx, def); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				load := func(n, per, workers int) {
					var wg sync.WaitGroup
					for g := 0; g < workers; g++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								i := seq.Add(int64(per)) - int64(per)
								if i >= int64(n) {
									return
								}
								subs := make([]lb.Submission, min(per, n-int(i)))
								for k := range subs {
									subs[k] = benchItem("b", i+int64(k))
								}
								out, err := s.SubmitMany(ctx, subs, bd.opts...)
								if err != nil {
									b.Error(err)
									return
								}
								for _, o := range out {
									if o.Err != nil {
										b.Error(o.Err)
										return
									}
								}
							}
						}()
					}
					wg.Wait()
				}
				load(players, 100, 64)
				seq.Store(int64(players))
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				benchMark(b, "LB_BENCH_BEFORE")
				cpu0 := redisCPU(b, rdb)
				b.ResetTimer()
				load(players+b.N, per, workers)
				b.StopTimer()
				cpu := redisCPU(b, rdb) - cpu0
				benchMark(b, "LB_BENCH_AFTER")
				stats := commandStats(b, rdb)
				fc := stats["fcall"]
				if fc.Calls == 0 {
					b.Fatal("no FCALL in commandstats")
				}
				b.ReportMetric(fc.Usec/float64(fc.Calls), "redis-us/call")
				b.ReportMetric(fc.Usec/float64(b.N), "redis-us/item")
				b.ReportMetric(float64(fc.Calls)/float64(b.N), "fcalls/item")
				if os.Getenv("LB_BENCH_COMMANDS") != "" { // the commands' share, as BenchmarkReadScript reports it
					for c, st := range stats {
						if !redisinfo.IsScriptCommand(c) && c != "config|resetstat" && c != "info" {
							b.ReportMetric(st.Usec/float64(b.N), c+"-us/item")
						}
					}
				}
				if cpu > 0 {
					b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-cpu-us/item")
				}
			})
		}
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func rand8() string { return strconv.FormatInt(int64(os.Getpid())<<8|int64(len(os.Args)), 36) }

// benchMark runs the shell command in the environment variable name, if set.
func benchMark(b *testing.B, name string) {
	if c := os.Getenv(name); c != "" {
		if out, err := exec.Command("sh", "-c", c).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", name, err, out)
		}
	}
}

// benchItem is item i of the load generator's mix.
func benchItem(board string, i int64) lb.Submission {
	p := i
	if i%2 == 1 && i > 2 {
		p = 2 * ((i * 7919) % (i / 2))
	}
	return lb.Submission{Board: board, Player: "p" + strconv.FormatInt(p, 10), Score: float64((i * 104729) % 1_000_000)}
}

// redisCPU returns the CPU time the redis-server process has used (user and system, from /proc), 0 when that is
// not readable (another machine's Redis, no /proc).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid, _ := redisinfo.Field(info, "process_id")
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
