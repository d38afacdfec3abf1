package redisinfo

import (
	"context"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// info70 is INFO as Redis 7.0 prints it: CRLF, sections, subcommands with "|", fields not read here.
const info70 = "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.25\r\n\r\n# Commandstats\r\n" +
	"cmdstat_fcall:calls=100,usec=5000,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_zrank:calls=1000,usec=700.5,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_config|resetstat:calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"

// TestCommandStats reads info70's fields and commandstats, and then a real Redis's commandstats after a known number
// of commands.
func TestCommandStats(t *testing.T) {
	got := CommandStats(info70)
	want := map[string]CommandStat{"fcall": {100, 5000}, "zrank": {1000, 700.5}, "config|resetstat": {1, 10}}
	if len(got) != len(want) {
		t.Fatalf("CommandStats = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %+v, want %+v", k, got[k], v)
		}
	}
	fields := map[string]string{"used_cpu_sys": "1.5", "used_cpu_user": "2.25", "used_cpu": "",
		"cmdstat_zrank": "calls=1000,usec=700.5,usec_per_call=0.70,rejected_calls=0,failed_calls=0"}
	for name, want := range fields {
		if v, ok := Field(info70, name); v != want || ok != (want != "") {
			t.Errorf("Field(%q) = %q, %v; want %q", name, v, ok, want)
		}
	}
	if !IsScriptCommand("evalsha") || !IsScriptCommand("fcall_ro") || IsScriptCommand("zrank") {
		t.Error("IsScriptCommand")
	}

	ctx := context.Background()
	rdb := redistest.Standalone(t).Client(t)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		rdb.Get(ctx, "redisinfo:absent")
	}
	rdb.Eval(ctx, "redis.call('GET', KEYS[1]) return redis.call('GET', KEYS[1])", []string{"redisinfo:absent"})
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	st := CommandStats(info)
	if st["get"].Calls != 9 || st["eval"].Calls != 1 || st["get"].Usec <= 0 || st["eval"].Usec <= 0 {
		t.Errorf("after 7 GETs and an EVAL of 2: get %+v, eval %+v", st["get"], st["eval"])
	}
}
