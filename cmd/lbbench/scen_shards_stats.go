package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The sharded-boards scenario's measurements: every primary's INFO cpu and commandstats around a phase, and the
// figures the tables derive from them.

// nodeSnap is one primary's counters at a moment.
type nodeSnap struct {
	cpu  float64 // used_cpu_user + used_cpu_sys, seconds
	cmds map[string]redisinfo.CommandStat
}

// snap reads INFO cpu and commandstats of every primary.
func (b *shardEnv) snap(ctx context.Context) ([]nodeSnap, error) {
	out := make([]nodeSnap, len(b.nodes))
	for i, n := range b.nodes {
		info, err := n.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO of %s: %w", b.cl.addrs[i], err)
		}
		var cpu float64
		for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
			v, ok := redisinfo.Field(info, f)
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("INFO cpu of %s: no %s", b.cl.addrs[i], f)
			}
			cpu += x
		}
		out[i] = nodeSnap{cpu: cpu, cmds: redisinfo.CommandStats(info)}
	}
	return out, nil
}

// nodeKey names a per-primary figure of Sample.Extra: node<i>:<what>, per second of the phase (or a share).
func nodeKey(i int, what string) string { return "node" + strconv.Itoa(i) + ":" + what }

// addNodeStats puts what the primaries did between before and after (el seconds apart) into s.Extra, per second:
// redis_cpu (cores, summed over the primaries), the commands summed over the primaries (extraCmdCalls,
// extraCmdUsec: commandTable reads them), and per primary its cores, commands, script calls and their µs,
// and its share of the script calls, of their µs and of the CPU. Our own INFO is left out.
func addNodeStats(s *Sample, before, after []nodeSnap, el float64) {
	if s.Extra == nil {
		s.Extra = map[string]float64{}
	}
	var calls, usec, cpu float64
	for i := range after {
		c := (after[i].cpu - before[i].cpu) / el
		s.Extra[nodeKey(i, "cpu")] = c
		cpu += c
		var all, sc, su float64
		for name, a := range after[i].cmds {
			p := before[i].cmds[name]
			if a.Calls <= p.Calls || name == "info" {
				continue
			}
			dc, du := float64(a.Calls-p.Calls)/el, (a.Usec-p.Usec)/el
			s.Extra[extraCmdCalls+name] += dc
			s.Extra[extraCmdUsec+name] += du
			all += dc
			if redisinfo.IsScriptCommand(name) {
				sc, su = sc+dc, su+du
			}
		}
		s.Extra[nodeKey(i, "commands")] = all
		s.Extra[nodeKey(i, "script_calls")] = sc
		s.Extra[nodeKey(i, "script_usec")] = su
		calls, usec = calls+sc, usec+su
	}
	s.Extra["redis_cpu"] = cpu
	share := func(x, total float64) float64 {
		if total <= 0 {
			return 0
		}
		return x / total
	}
	for i := range after {
		s.Extra[nodeKey(i, "share_calls")] = share(s.Extra[nodeKey(i, "script_calls")], calls)
		s.Extra[nodeKey(i, "share_usec")] = share(s.Extra[nodeKey(i, "script_usec")], usec)
		s.Extra[nodeKey(i, "share_cpu")] = share(s.Extra[nodeKey(i, "cpu")], cpu)
	}
}

// step runs one load step against the server on the cluster (warmup, then the measured phase) and adds the
// server's CPU (cores), the load generator's, and every primary's figures (addNodeStats). With r, the operations
// the measured phase sent to each shard (r's counts then and before) go to its primary's "routed" figure.
func (b *shardEnv) step(ctx context.Context, st Step, op Op, r *routed) (Sample, error) {
	if st.Warmup > 0 {
		drive(ctx, Step{Workers: st.Workers, Duration: st.Warmup, MaxOps: 1 << 62}, op)
	}
	st.Warmup = 0
	n0, err := b.snap(ctx)
	if err != nil {
		return Sample{}, err
	}
	r0 := r.counts()
	s0, g0, m0, t0 := b.sv.usage(), selfUsage(), machineBusy(), time.Now()
	s := drive(ctx, st, op)
	s1, g1, m1, el := b.sv.usage(), selfUsage(), machineBusy(), time.Since(t0).Seconds()
	r1 := r.counts()
	n1, err := b.snap(ctx)
	if err != nil {
		return s, err
	}
	s.CPU = (s1.CPU - s0.CPU).Seconds() / el
	s.RSS = s1.RSS
	s.Extra = map[string]float64{"gen_cpu": (g1.CPU - g0.CPU).Seconds() / el, "machine": (m1 - m0).Seconds() / el}
	addNodeStats(&s, n0, n1, el)
	if r != nil {
		var all float64
		for k := range r1 {
			d := float64(r1[k]-r0[k]) / el
			s.Extra[nodeKey(r.place[k], "routed")] += d
			all += d
		}
		for i := range b.nodes {
			if all > 0 {
				s.Extra[nodeKey(i, "share_routed")] = s.Extra[nodeKey(i, "routed")] / all
			}
		}
	}
	return s, nil
}

// routed counts the submissions the load generator sends to each shard of a board (leaderboard.ShardOf of their
// players): on a sharded board each is one submit script call on its shard.
type routed struct {
	shards int
	place  []int // primary of each shard
	sent   []atomic.Int64
}

func newRouted(shards int, place []int) *routed {
	return &routed{shards: shards, place: place, sent: make([]atomic.Int64, shards)}
}

func (r *routed) counts() []int64 {
	if r == nil {
		return nil
	}
	out := make([]int64, len(r.sent))
	for k := range r.sent {
		out[k] = r.sent[k].Load()
	}
	return out
}

// submitOp is the submit scenario's submitOp (workload(i) to board through sv's API, the mutation doc), counting
// each submission's shard.
func (r *routed) submitOp(sv *service, board, doc string) Op {
	return func(ctx context.Context, w int, i int64) error {
		p, s := workload(i)
		r.sent[leaderboard.ShardOf(p, r.shards)].Add(1)
		_, err := sv.hot.post(ctx, w, submitKey, submitBodyOf(doc, board, p, s))
		return err
	}
}

// busy formats the cores the whole machine used over a phase, and in brackets those of processes other than the
// primaries, the server and the load generator (others' test runs share this machine).
func busy(m Sample) string {
	others := max(m.Extra["machine"]-m.Extra["redis_cpu"]-m.CPU-m.Extra["gen_cpu"], 0)
	return fmt.Sprintf("%.2f (%.2f)", m.Extra["machine"], others)
}

// Figures per operation of a shards sample (0 when nothing was done).
func perOpOf(s Sample, x float64) float64 {
	if s.Rate <= 0 {
		return 0
	}
	return x / s.Rate
}

func scriptCalls(s Sample) float64 {
	var x float64
	for _, c := range redisinfo.ScriptCommands {
		x += s.Extra[extraCmdCalls+c]
	}
	return x
}

func scriptUsec(s Sample) float64 {
	var x float64
	for _, c := range redisinfo.ScriptCommands {
		x += s.Extra[extraCmdUsec+c]
	}
	return x
}

// backgroundCommand tells the commands no read or write of the steps sends: the server's close checker lists
// every board every CLOSE_CHECK_INTERVAL (5 s by default) with one SMEMBERS per hash slot, 16,384 in all
// (Store.boardIDs); cluster clients refresh their slot maps (CLUSTER ...); PING.
func backgroundCommand(name string) bool {
	return name == "smembers" || name == "ping" || strings.HasPrefix(name, "cluster")
}

// commandCalls is the commands the primaries ran, per second (commands scripts ran count too), without the
// background ones (background true: only those).
func commandCalls(s Sample, background bool) float64 {
	var x float64
	for k, v := range s.Extra {
		if name, ok := strings.CutPrefix(k, extraCmdCalls); ok && backgroundCommand(name) == background {
			x += v
		}
	}
	return x
}

var (
	shScriptsPerOp   = func(s Sample) float64 { return perOpOf(s, scriptCalls(s)) }
	shScriptUsecCall = func(s Sample) float64 {
		if c := scriptCalls(s); c > 0 {
			return scriptUsec(s) / c
		}
		return 0
	}
	shRedisUsPerOp  = func(s Sample) float64 { return perOpOf(s, s.Extra["redis_cpu"]) * 1e6 }
	shServerUsPerOp = func(s Sample) float64 { return perOpOf(s, s.CPU) * 1e6 }
	shGenUsPerOp    = func(s Sample) float64 { return perOpOf(s, s.Extra["gen_cpu"]) * 1e6 }
	shCommandsPerOp = func(s Sample) float64 { return perOpOf(s, commandCalls(s, false)) }
	shScriptUsPerOp = func(s Sample) float64 { return perOpOf(s, scriptUsec(s)) }
)
