package main

import (
	"math"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
)

// TestParseMonitorLine reads MONITOR lines as Redis 7.0 prints them: a client's command, a script's (EVAL and
// FCALL alike show "lua"), and lines that are not commands.
func TestParseMonitorLine(t *testing.T) {
	for _, c := range []struct {
		line    string
		name    string
		lua, ok bool
	}{
		{"+1796447133.417885 [0 127.0.0.1:45146] \"fcall\" \"f\" \"1\" \"x\"\r\n", "fcall", false, true},
		{"+1796447133.417981 [0 lua] \"SET\" \"x\" \"1\"\r\n", "set", true, true},
		{"+1796447133.417981 [0 unix:/tmp/r.sock] \"ZRANK\" \"k\" \"m\"\r\n", "zrank", false, true},
		{"+OK\r\n", "", false, false},
		{"-ERR x\r\n", "", false, false},
	} {
		name, lua, ok := parseMonitorLine(c.line)
		if name != c.name || lua != c.lua || ok != c.ok {
			t.Errorf("%q: %q %v %v, want %q %v %v", c.line, name, lua, ok, c.name, c.lua, c.ok)
		}
	}
}

// TestAddNodeStats: the primaries' counters over a phase become per-second figures, summed and per primary, with
// each primary's shares; our own INFO is left out.
func TestAddNodeStats(t *testing.T) {
	before := []nodeSnap{
		{cpu: 1, cmds: map[string]redisinfo.CommandStat{"fcall": {Calls: 10, Usec: 100}, "info": {Calls: 5, Usec: 50}}},
		{cpu: 2, cmds: map[string]redisinfo.CommandStat{}},
	}
	after := []nodeSnap{
		{cpu: 1.5, cmds: map[string]redisinfo.CommandStat{"fcall": {Calls: 40, Usec: 700}, "zrank": {Calls: 30, Usec: 60}, "info": {Calls: 6, Usec: 60}}},
		{cpu: 3.5, cmds: map[string]redisinfo.CommandStat{"fcall": {Calls: 10, Usec: 200}}},
	}
	var s Sample
	addNodeStats(&s, before, after, 2) // 2 seconds
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("redis_cpu", s.Extra["redis_cpu"], 1)              // (0.5 + 1.5) / 2
	near("calls:fcall", s.Extra[extraCmdCalls+"fcall"], 20) // (30 + 10) / 2
	near("usec:fcall", s.Extra[extraCmdUsec+"fcall"], 400)  // (600 + 200) / 2
	near("node0 commands", s.Extra[nodeKey(0, "commands")], 30)
	near("node0 share_calls", s.Extra[nodeKey(0, "share_calls")], 0.75)
	near("node1 share_usec", s.Extra[nodeKey(1, "share_usec")], 0.25)
	near("node1 share_cpu", s.Extra[nodeKey(1, "share_cpu")], 0.75)
	if _, ok := s.Extra[extraCmdCalls+"info"]; ok {
		t.Error("our own INFO counted")
	}
	s.Rate = 10
	near("commands per op", shCommandsPerOp(s), 3.5) // (20 fcall + 15 zrank) / 10
	near("script µs per call", shScriptUsecCall(s), 20)
}
