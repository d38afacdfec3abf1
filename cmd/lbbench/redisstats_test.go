package main

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// TestCommandTable checks the per-command breakdown against figures worked out by hand: two readings of INFO
// commandstats one phase apart, the medians of three runs, and the row the table prints from them.
func TestCommandTable(t *testing.T) {
	before := redisinfo.CommandStats("# Commandstats\r\n" +
		"cmdstat_fcall:calls=100,usec=5000,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zrank:calls=1000,usec=700,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n")
	after := redisinfo.CommandStats("# Commandstats\r\n" +
		"cmdstat_fcall:calls=300,usec=25000,usec_per_call=83.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zrank:calls=21000,usec=14700,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=20000,usec=2000,usec_per_call=0.10,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n")
	// A phase of 2 s with 200 reads, each one script call of 100 ZRANKs and 100 HGETs.
	s := Sample{Rate: 100, Extra: map[string]float64{"redis_cpu": 0.012}}
	addCommandStats(&s, before, after, 2)
	want := map[string]float64{
		"usec:fcall": 10000, "calls:fcall": 100, "usec:zrank": 7000, "calls:zrank": 10000, "usec:hget": 1000,
		"calls:hget": 10000,
	}
	for k, v := range want {
		if s.Extra[k] != v {
			t.Errorf("Extra[%q] = %v, want %v", k, s.Extra[k], v)
		}
	}
	if _, ok := s.Extra["usec:config|resetstat"]; ok {
		t.Error("a command with no calls in the phase is in the sample")
	}
	use := commandsPerOp(s)
	if len(use) != 3 || use[0].name != "fcall" || !use[0].scriptRunner || use[1].name != "zrank" ||
		use[1].calls != 100 || use[1].usec != 70 || use[2].name != "hget" || use[2].scriptRunner {
		t.Fatalf("commandsPerOp = %+v", use)
	}

	tab := commandTable("t", "read", "req")
	// Three runs; the median run is s. The per-item form divides by the items of an operation.
	lo, hi := s, s
	lo.Rate, hi.Rate = 50, 400
	addCommandRow(tab, "friends", "new", []Sample{lo, s, hi}, 1)
	addCommandRow(tab, "friends", "new", []Sample{s}, 10)
	addCommandRow(tab, "idle", "new", []Sample{{}}, 1)
	if len(tab.rows) != 2 {
		t.Fatalf("rows = %q", tab.rows)
	}
	// Per read: Redis CPU 0.012 cores / 100 reads/s = 120 µs; script calls 100 µs, of which ZRANK 70 and HGET 10.
	if got, want := strings.Join(tab.rows[0], " | "),
		"friends | new | 120.0 | 100.0 | 20.0 | ZRANK 100.00 × 0.70, HGET 100.00 × 0.10"; got != want {
		t.Errorf("row = %q\nwant  %q", got, want)
	}
	if got, want := strings.Join(tab.rows[1], " | "),
		"friends | new | 12.0 | 10.0 | 2.0 | ZRANK 10.00 × 0.70, HGET 10.00 × 0.10"; got != want {
		t.Errorf("per-item row = %q\nwant  %q", got, want)
	}
}

// stepScript runs two ZADDs and one HGET per call: the shape TestStepCommands counts.
var stepScript = redis.NewScript(`redis.call('ZADD', KEYS[1], ARGV[1], 'a')
redis.call('ZADD', KEYS[1], ARGV[1], 'b')
return redis.call('HGET', KEYS[2], 'f')`)

// TestStepCommands runs a step on the tool's own redis-server whose every operation is one script call of a known
// shape plus one plain GET, and checks what stepOn recorded per operation against that shape: 1 EVALSHA, 2
// ZADDs and 1 HGET inside it, 1 GET beside it, and the script's time at least its commands'.
func TestStepCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := newEnv(ctx, options{Quick: true, Duration: 500 * time.Millisecond, Runs: 1, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if err := stepScript.Load(ctx, e.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	s := e.stepOn(ctx, nil, Step{Workers: 4, Duration: 500 * time.Millisecond, MaxOps: 1 << 40},
		func(ctx context.Context, w int, i int64) error {
			if err := stepScript.EvalSha(ctx, e.rdb, []string{"step:z", "step:h"}, i).Err(); err != nil &&
				err != redis.Nil {
				return err
			}
			if err := e.rdb.Get(ctx, "step:s").Err(); err != redis.Nil {
				return err
			}
			return nil
		})
	if s.Errs > 0 || s.Ops < 100 {
		t.Fatalf("step: %d ops, %d errors (%s)", s.Ops, s.Errs, s.FirstErr)
	}
	want := map[string]float64{"evalsha": 1, "zadd": 2, "hget": 1, "get": 1}
	got := map[string]commandUse{}
	for _, c := range commandsPerOp(s) {
		got[c.name] = c
	}
	for name, calls := range want {
		c, ok := got[name]
		// The phase's wall time and its operations are taken a few µs apart from Redis's counters: 5 % slack.
		if !ok || math.Abs(c.calls-calls) > 0.05*calls {
			t.Errorf("%s: %+v a step operation, want %v calls", name, c, calls)
		}
		if ok && c.scriptRunner != (name == "evalsha") {
			t.Errorf("%s: scriptRunner %v", name, c.scriptRunner)
		}
	}
	if ev := got["evalsha"]; ev.usec < got["zadd"].usec+got["hget"].usec {
		t.Errorf("the script call's %.2f µs an operation is less than its commands' %.2f", ev.usec,
			got["zadd"].usec+got["hget"].usec)
	}
}
