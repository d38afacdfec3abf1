package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The sharded-boards scenario (issue 46): a board whose players are split over shardCount shards, each on its own
// hash slot, one on each primary of the tool's Redis Cluster (startCluster: 3 primaries, no replicas), against an
// unsharded board on the same cluster, both through one server process (the new build; -baseline's cannot make
// sharded boards). In every run both boards are measured back to back, the first of the pair alternating. Before
// and after every measured phase it reads, on every primary, INFO cpu (used_cpu_user + used_cpu_sys) and INFO
// commandstats, so each figure is split by primary and summed over them.
const (
	shardCount        = clusterPrimaries // S of the sharded boards: one shard per primary
	shardClients      = 32               // closed-loop clients of the write and read steps
	shardPlayersFull  = 1_000_000        // players on each read board (-shard-players)
	shardPlayersQuick = 20_000
	shardPlacementIDs = 1000 // board ids whose shards' placement the capacity model counts
	shardShareTol     = 0.15 // each primary's share of the sharded board's writes: within ±15 % of 1/S
	shardWriteCost    = 1.1  // sharded ≤ 1.1× the unsharded Redis time per submission
	shardReadCost     = 2.0  // sharded ≤ 2× the unsharded read (commands, server CPU, Redis CPU per read)
	shardCheckRanks   = 50   // players whose rank the cross-check compares on both read boards
	shardCheckArounds = 10   // players whose aroundMe it compares
	shardProbeOps     = 20   // operations of each MONITOR probe, one after another
)

// shardEnv is the scenario's cluster, a client per primary (INFO), the slot map, and the server on the cluster.
type shardEnv struct {
	e     *env
	cl    *redisCluster
	nodes []*redis.Client // one per primary, in cl.addrs order
	slots []int           // primary (index into nodes) of every hash slot
	sv    *service
}

// startShardEnv starts the cluster and one server process on it (KEY_PREFIX prefixDefault, as the cluster's
// Store), and reads which primary serves every slot.
func (e *env) startShardEnv(ctx context.Context) (*shardEnv, error) {
	cl, err := startCluster(ctx, e.dir)
	if err != nil {
		return nil, err
	}
	b := &shardEnv{e: e, cl: cl, slots: make([]int, 16384)}
	for _, addr := range cl.addrs {
		b.nodes = append(b.nodes, redis.NewClient(&redis.Options{Addr: addr}))
	}
	cs, err := cl.rdb.ClusterShards(ctx).Result()
	if err != nil {
		b.close()
		return nil, err
	}
	for i := range b.slots {
		b.slots[i] = -1
	}
	for _, sh := range cs {
		k := -1
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				k = slices.Index(cl.addrs, net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)))
			}
		}
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End && k >= 0; s++ {
				b.slots[s] = k
			}
		}
	}
	if i := slices.Index(b.slots, -1); i >= 0 {
		b.close()
		return nil, fmt.Errorf("cluster: slot %d has no primary of %v", i, cl.addrs)
	}
	sv := &service{name: "shards", bin: e.newSvc().bin, prefix: prefixDefault}
	sv.proc, sv.addr, err = startServer(ctx, sv.bin, e.dir, "server-shards.log",
		"REDIS_CLUSTER_ADDRS="+strings.Join(cl.addrs, ","), append([]string{"KEY_PREFIX=" + prefixDefault}, e.o.ServerEnv...)...)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("server on the cluster: %w", err)
	}
	sv.hot = newRawHTTP(sv.addr, "/graphql")
	b.sv = sv
	e.logf("shards: %d primaries on %s; server pid %d on %s", len(cl.addrs), strings.Join(cl.addrs, ", "),
		sv.proc.pid(), sv.addr)
	return b, nil
}

func (b *shardEnv) close() {
	if b.sv != nil {
		b.sv.proc.stop()
		b.sv.hot.closeAll()
	}
	for _, n := range b.nodes {
		n.Close()
	}
	b.cl.stop()
}

// placement returns the primary of each shard of board (one for an unsharded board).
func (b *shardEnv) placement(board string, shards int) []int {
	if shards <= 1 {
		return []int{b.slots[leaderboard.HashSlot(leaderboard.KeyBase(prefixDefault, board))]}
	}
	out := make([]int, shards)
	for i := range out {
		out[i] = b.slots[leaderboard.HashSlot(leaderboard.ShardKeyBase(prefixDefault, board, i, shards))]
	}
	return out
}

// distinct counts the different primaries in p.
func distinct(p []int) int {
	s := slices.Clone(p)
	slices.Sort(s)
	return len(slices.Compact(s))
}

// pickBoard returns the first id "<prefix>-<n>" whose shards are on as many primaries as there are shards (up to
// the primaries), and their placement.
func (b *shardEnv) pickBoard(prefix string, shards int) (string, []int, error) {
	for n := range 100_000 {
		id := fmt.Sprintf("%s-%d", prefix, n)
		if p := b.placement(id, shards); distinct(p) == min(shards, len(b.nodes)) {
			return id, p, nil
		}
	}
	return "", nil, fmt.Errorf("no board id %s-N spreads %d shards over %d primaries", prefix, shards, len(b.nodes))
}

// createBoard creates board id with shards shards through the server's createLeaderboard (the field left out for
// an unsharded board, as every client before sharding sends it).
func (b *shardEnv) createBoard(ctx context.Context, id string, shards int) error {
	in := map[string]any{"id": id}
	if shards > 1 {
		in["shards"] = shards
	}
	_, err := b.sv.call(ctx, adminKey, `mutation($in: LeaderboardInput!) { createLeaderboard(input: $in) { id } }`,
		map[string]any{"in": in})
	if err != nil {
		return fmt.Errorf("create board %q (shards %d): %w", id, shards, err)
	}
	return nil
}

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

// submitOp is the submit scenario's submitOp (workload(i) to board through sv's API), counting each submission's
// shard.
func (r *routed) submitOp(sv *service, board string) Op {
	return func(ctx context.Context, w int, i int64) error {
		p, s := workload(i)
		r.sent[leaderboard.ShardOf(p, r.shards)].Add(1)
		_, err := sv.hot.post(ctx, w, submitKey, submitBody(board, p, s))
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

// shardSide is one board of a step: the sharded or the unsharded one.
type shardSide struct {
	label  string
	shards int
	runs   []Sample
	place  []int  // primary of each shard (of the last run's board)
	board  string // the last run's board
	probe  probeResult
}

// runShards (scenario 8): writes per primary, Redis's time per submission, reads on big boards, and the capacity
// model, each sharded vs unsharded in the same run.
func runShards(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	if e.baseline() {
		e.logf("shards: the new server only (a -baseline build has no sharded boards)")
	}
	b, err := e.startShardEnv(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()
	var tables []*table
	sharded := &shardSide{label: fmt.Sprintf("%d shards", shardCount), shards: shardCount}
	plain := &shardSide{label: "unsharded", shards: 1}

	// A board of twice as many shards as primaries (two on each), for the writes only: how Redis's time per
	// submission, and so the ceiling, moves with S.
	wide := &shardSide{label: fmt.Sprintf("%d shards", 2*shardCount), shards: 2 * shardCount}

	// Writes: a fresh board of each kind in every run, the first of them rotating.
	for r := range e.o.Runs {
		sides := []*shardSide{sharded, plain, wide}
		if r%2 == 1 {
			sides = []*shardSide{plain, sharded, wide}
		}
		if r%3 == 2 {
			sides = []*shardSide{wide, sharded, plain}
		}
		for _, sd := range sides {
			id, place, err := b.pickBoard(fmt.Sprintf("shards-write-s%d-r%d", sd.shards, r), sd.shards)
			if err != nil {
				return tables, err
			}
			if err := b.createBoard(ctx, id, sd.shards); err != nil {
				return tables, err
			}
			sd.place, sd.board = place, id
			rt := newRouted(sd.shards, place)
			s, err := b.step(ctx, e.stepOf(shardClients), rt.submitOp(b.sv, id), rt)
			if err != nil {
				return tables, err
			}
			sd.runs = append(sd.runs, s)
			e.logf("shards: writes, %s (board %q on primaries %v): %.0f submissions/s, Redis %.1f µs and server %.1f µs a submission",
				sd.label, id, place, s.Rate, shRedisUsPerOp(s), shServerUsPerOp(s))
		}
	}
	tables = append(tables, b.perPrimaryTable(sharded, plain), b.perSubmissionTable(sharded, plain, wide))
	probes := &table{title: fmt.Sprintf("8f. Sharded boards: commands sent to Redis per operation (MONITOR on every "+
		"primary, %d operations one after another), %d shards vs unsharded", shardProbeOps, shardCount),
		head: []string{"operation", "board", "commands sent/op", "by command", "primaries", "commands scripts ran/op"}}
	for _, sd := range []*shardSide{sharded, plain} {
		rt := newRouted(sd.shards, sd.place)
		op := rt.submitOp(b.sv, sd.board)
		if sd.probe, err = b.probe(ctx, func(ctx context.Context, i int64) error { return op(ctx, 0, 1e9+i) }); err != nil {
			return tables, err
		}
	}
	b.addProbeRows(probes, "submitScore", sharded, plain)
	probes.notes = append(probes.notes, "MONITOR on every primary while the server answers "+
		fmt.Sprint(shardProbeOps)+" requests from one client, one after another (so nothing is merged or "+
		"grouped with other requests, as it is under load), on the boards of the steps above (the last run's "+
		"write boards, the read boards): the commands the server sent per request, summed over the primaries "+
		"(without the background ones: SMEMBERS, CLUSTER …, PING), the primaries they went to, and the commands "+
		"its scripts ran there (MONITOR's lua lines). Round trips, from the code (leaderboard/shardwrite.go, "+
		"shardread.go): a submission to a sharded board makes three in a row (a block of arrival numbers from "+
		"shard 0, unless a block being taken covers it; the submit script on the player's shard; its placement "+
		"on the other shards, in parallel), rank and aroundMe two (the player found and placed on its shard, then "+
		"placed on the other shards in parallel), top one (every shard in parallel) when the server's top cache "+
		"does not answer it.")
	cmds := commandTable("8c. Sharded boards: Redis's time per submission by command, summed over the primaries",
		"board", "submission")
	for _, sd := range []*shardSide{sharded, plain, wide} {
		addCommandRow(cmds, "submitScore", sd.label, sd.runs, 1)
	}
	tables = append(tables, cmds)

	reads, readCmds, err := b.readsTables(ctx, probes)
	if reads != nil {
		tables = append(tables, reads, readCmds)
	}
	if err != nil {
		return tables, err
	}
	tables = append(tables, probes, b.capacityTable(sharded, plain, wide))
	return tables, nil
}

// primaryLabel names primary i and the shards of a board on it.
func (b *shardEnv) primaryLabel(i int) string { return fmt.Sprintf("%d (%s)", i+1, b.cl.addrs[i]) }

func shardsOn(place []int, i int) string {
	var out []string
	for k, p := range place {
		if p == i {
			out = append(out, strconv.Itoa(k))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// perPrimaryTable is figure 1: each primary's share of the sharded board's submissions (each one submit script
// call on its shard), of the script calls of every kind and their µs, and of Redis's CPU, with the unsharded
// board's beside it; and the targets on the shares.
func (b *shardEnv) perPrimaryTable(sharded, plain *shardSide) *table {
	sm, pm := medianSample(sharded.runs), medianSample(plain.runs)
	t := &table{title: fmt.Sprintf("8. Sharded boards: writes per primary, submitScore from %d clients to one board "+
		"of %d shards (one on each primary) vs one unsharded board", shardClients, shardCount),
		head: []string{"primary", "shards", "sharded: submissions (submit calls)", "script calls, all",
			"of them not submit", "script µs", "Redis CPU (INFO cpu)", "unsharded: board", "script calls",
			"script µs", "Redis CPU"}}
	pct := func(share float64, abs string) string { return fmt.Sprintf("%.1f %% (%s)", 100*share, abs) }
	lo, hi := 1/float64(shardCount)*(1-shardShareTol), 1/float64(shardCount)*(1+shardShareTol)
	okCalls, okUsec, okCPU := true, true, true
	var calls, usec, cpu []string
	for i := range b.nodes {
		x := func(m Sample, what string) float64 { return m.Extra[nodeKey(i, what)] }
		cores := func(m Sample) string {
			return pct(x(m, "share_cpu"), fmt.Sprintf("%.2f cores", x(m, "cpu")))
		}
		scriptTime := func(m Sample) string {
			return pct(x(m, "share_usec"), fmt.Sprintf("%.3f s/s", x(m, "script_usec")/1e6))
		}
		t.add(b.primaryLabel(i), shardsOn(sharded.place, i),
			pct(x(sm, "share_routed"), fmtRate(x(sm, "routed"))+"/s"),
			pct(x(sm, "share_calls"), fmtRate(x(sm, "script_calls"))+"/s"),
			fmtRate(x(sm, "script_calls")-x(sm, "routed"))+"/s",
			scriptTime(sm), cores(sm),
			shardsOn(plain.place, i),
			pct(x(pm, "share_calls"), fmtRate(x(pm, "script_calls"))+"/s"),
			scriptTime(pm), cores(pm))
		in := func(v float64) bool { return v >= lo && v <= hi }
		okCalls = okCalls && in(x(sm, "share_routed"))
		okUsec = okUsec && in(x(sm, "share_usec"))
		okCPU = okCPU && in(x(sm, "share_cpu"))
		calls = append(calls, fmt.Sprintf("%.1f", 100*x(sm, "share_routed")))
		usec = append(usec, fmt.Sprintf("%.1f", 100*x(sm, "share_usec")))
		cpu = append(cpu, fmt.Sprintf("%.1f", 100*x(sm, "share_cpu")))
	}
	t.notes = append(t.notes, "Per primary, in every run, then the median over the runs; in brackets the primary's "+
		"own rate. Submissions: the load generator's count of the submissions whose player's shard "+
		"(leaderboard.ShardOf) is on that primary; on a sharded board each is one call of the submit script on "+
		"its shard (submitSharded: no merging with other requests). Script calls, all: INFO commandstats' FCALL, "+
		"FCALL_RO, EVALSHA and EVAL calls on the primary: besides the submit calls, the placement of every "+
		"submission on the shards its player is not on (shardnear.lua, one call on each) and the board-wide "+
		"arrival counter "+
		"(arrivals.lua, shard 0, one call per block of waiting submissions); \"not submit\" is all of them "+
		"less the submissions. Script µs: those calls' time (commandstats). Redis CPU: used_cpu_user + "+
		"used_cpu_sys of the redis-server, everything it did (the cluster bus and cron included). Shards: the "+
		"shard numbers of the board on that primary (the boards of every run are picked with their shards on "+
		"different primaries; see the capacity model for how often an id gets that by itself). The unsharded "+
		"board's submissions are merged into fewer script calls by the server's batcher.")
	goal := fmt.Sprintf("⅓ ± %.0f %% each (%.1f–%.1f %%)", 100*shardShareTol, 100*lo, 100*hi)
	sharded.checkErrs(b.e, "sharded board: each primary's share of its submit script calls", goal,
		strings.Join(calls, " / ")+" %", okCalls)
	sharded.checkErrs(b.e, "sharded board: each primary's share of the script time", goal,
		strings.Join(usec, " / ")+" %", okUsec)
	sharded.checkErrs(b.e, "sharded board: each primary's share of Redis CPU (INFO cpu)", goal,
		strings.Join(cpu, " / ")+" %", okCPU)
	return t
}

// checkErrs records a target that also fails on any error of the side's runs.
func (sd *shardSide) checkErrs(e *env, name, goal, measured string, ok bool) {
	m := medianSample(sd.runs)
	if m.Errs > 0 {
		measured += fmt.Sprintf("; %d errors", m.Errs)
	}
	e.check("shards: "+name, goal, measured, ok && m.Errs == 0)
}

// perSubmissionTable is figure 2: Redis's time per submission, sharded vs unsharded, with per-run ratios; and
// its targets.
func (b *shardEnv) perSubmissionTable(sharded, plain, wide *shardSide) *table {
	t := &table{title: fmt.Sprintf("8b. Sharded boards: Redis's time per submission, %d shards vs unsharded "+
		"(submitScore, %d clients)", shardCount, shardClients),
		head: []string{"board", "submissions/s", "p50", "p99", "script calls/submission", "script µs/call",
			"script µs/submission", "Redis CPU µs/submission (all primaries)", "server CPU µs/submission",
			"loadgen CPU µs", "machine busy, cores (others)", "errors"}}
	row := func(sd *shardSide) {
		m := medianSample(sd.runs)
		t.add(sd.label, fmtRate(m.Rate), fmtDur(m.P50), fmtDur(m.P99), fmt.Sprintf("%.2f", shScriptsPerOp(m)),
			fmt.Sprintf("%.1f", shScriptUsecCall(m)), fmt.Sprintf("%.1f", shScriptUsPerOp(m)),
			fmt.Sprintf("%.1f", shRedisUsPerOp(m)),
			fmt.Sprintf("%.1f", shServerUsPerOp(m)), fmt.Sprintf("%.1f", shGenUsPerOp(m)), busy(m), fmtErrs(m))
	}
	row(sharded)
	row(plain)
	ratio := func(f func(Sample) float64) float64 { return medianRatio(sharded.runs, plain.runs, f) }
	script, redisCPU := ratio(shScriptUsPerOp), ratio(shRedisUsPerOp)
	t.add("sharded/unsharded", fmtTimes(ratio(reqRate)), fmtTimes(ratio(func(s Sample) float64 { return float64(s.P50) })),
		fmtTimes(ratio(func(s Sample) float64 { return float64(s.P99) })), fmtTimes(ratio(shScriptsPerOp)),
		fmtTimes(ratio(shScriptUsecCall)), fmtTimes(script), fmtTimes(redisCPU),
		fmtTimes(ratio(shServerUsPerOp)), fmtTimes(ratio(shGenUsPerOp)), "", "")
	row(wide)
	t.notes = append(t.notes, "Each run writes a fresh board of each kind, back to back (the first rotating; the "+
		"sharded and the unsharded board alternate which goes first); figures are medians over the runs, the ratio "+
		"row the median of the per-run ratios. Script "+
		"calls and µs: INFO commandstats' FCALL, EVALSHA (and read-only forms), summed over the primaries: Redis's "+
		"time inside the scripts, their commands included, per call and per submission. On the unsharded board "+
		"the server's batcher merges the concurrent submissions into one submit call of their items (up to 128), "+
		"so a call carries several; on the sharded board every submission makes its own calls: the submit "+
		"script on its shard, the placement of the new (and previous) score on the other shards (shardnear.lua, "+
		"one call on each, in one pipeline) and its share of a call of the arrival counter on shard 0 (arrivals.lua, "+
		"one per block of the submissions waiting meanwhile). The per-submission figures are the ones that "+
		"compare. Redis CPU: used_cpu_user + used_cpu_sys of every primary over the phase, summed, per "+
		"submission: everything Redis did for it (requests, scripts, replies; the cluster bus, cron and the "+
		"server's background commands too). The server's CPU from /proc; all of them share the machine's 2 cores. "+
		"Machine busy: the cores the whole machine used over the phase (/proc/stat), and in brackets those "+
		"of other processes than the primaries, the server and the load generator. "+
		fmt.Sprintf("The %s row: a board of %d shards, two on each primary, written in the same runs (no target; "+
			"for the capacity model: how the time per submission grows with S).", wide.label, wide.shards))
	sm, pm := medianSample(sharded.runs), medianSample(plain.runs)
	sharded.checkErrs(b.e, "Redis time in the submit script a submission, sharded vs unsharded",
		fmt.Sprintf("≤ %.1f×", shardWriteCost),
		fmt.Sprintf("%s (%.1f vs %.1f µs; %.1f vs %.1f µs a call)", fmtTimes(script), shScriptUsPerOp(sm),
			shScriptUsPerOp(pm), shScriptUsecCall(sm), shScriptUsecCall(pm)),
		script > 0 && script <= shardWriteCost && pm.Errs == 0)
	sharded.checkErrs(b.e, "Redis CPU a submission (all primaries: arrival counter and placements included), sharded vs unsharded",
		fmt.Sprintf("≤ %.1f×", shardWriteCost),
		fmt.Sprintf("%s (%.1f vs %.1f µs)", fmtTimes(redisCPU), shRedisUsPerOp(sm), shRedisUsPerOp(pm)),
		redisCPU > 0 && redisCPU <= shardWriteCost && pm.Errs == 0)
	return t
}

// shardRead is one read of the read steps.
type shardRead struct {
	name  string
	query string
	vars  func(board string, n int) []byte
}

func shardReads() []shardRead {
	player := func(board string, n int) []byte {
		return []byte(`{"b":` + strconv.Quote(board) + `,"p":` + strconv.Quote(fixturePlayer(rand.IntN(n))) + `}`)
	}
	return []shardRead{
		{"rank", rankQuery, player},
		{"aroundMe(radius:5)", aroundQuery, player},
		{"top(first:10)", readTopQuery(10), func(board string, n int) []byte {
			return []byte(`{"b":` + strconv.Quote(board) + `}`)
		}},
	}
}

// readsTables is figure 3: rank, aroundMe and top(first:10) on a sharded and an unsharded board of the same
// players, through the server, with their costs per read; first it loads both boards and checks that they answer
// the same.
func (b *shardEnv) readsTables(ctx context.Context, probes *table) (*table, *table, error) {
	e := b.e
	n := e.o.ShardPlayers
	if n <= 0 {
		n = shardPlayersFull
		if e.o.Quick {
			n = shardPlayersQuick
		}
	}
	sharded := &shardSide{label: fmt.Sprintf("%d shards", shardCount), shards: shardCount}
	plain := &shardSide{label: "unsharded", shards: 1}
	var seeds []string
	ids := map[*shardSide]string{}
	for _, sd := range []*shardSide{plain, sharded} {
		id, place, err := b.pickBoard(fmt.Sprintf("shards-read-s%d", sd.shards), sd.shards)
		if err != nil {
			return nil, nil, err
		}
		if err := b.createBoard(ctx, id, sd.shards); err != nil {
			return nil, nil, err
		}
		sd.place, ids[sd] = place, id
		n0, err := b.snap(ctx)
		if err != nil {
			return nil, nil, err
		}
		start := time.Now()
		if err := loadFixture(ctx, b.cl.store, id, 0, n, e.sizes().LoadWorkers); err != nil {
			return nil, nil, err
		}
		d := time.Since(start)
		n1, err := b.snap(ctx)
		if err != nil {
			return nil, nil, err
		}
		var s Sample
		addNodeStats(&s, n0, n1, d.Seconds())
		seeds = append(seeds, fmt.Sprintf("%s %s in %s (%s items/s, Redis CPU %.1f µs an item over the primaries, "+
			"%.2f script calls per 1000 items)", sd.label, fmt.Sprint(n), d.Round(100*time.Millisecond),
			fmtRate(float64(n)/d.Seconds()), s.Extra["redis_cpu"]*d.Seconds()/float64(n)*1e6,
			scriptCalls(s)*d.Seconds()/float64(n)*1000))
		e.logf("shards: board %q (%s, primaries %v) loaded with %d players in %s", id, sd.label, place, n,
			d.Round(100*time.Millisecond))
		if err := e.verifyBoard(ctx, b.sv, id, n); err != nil {
			return nil, nil, err
		}
	}
	checked, mismatch, err := b.crossCheck(ctx, ids[sharded], ids[plain], n)
	if err != nil {
		return nil, nil, err
	}
	ok := mismatch == ""
	if !ok {
		checked += "; differs: " + mismatch
	}
	e.check(fmt.Sprintf("shards: a sharded board of %d players reads as the unsharded one", n),
		"the same answers", checked, ok)

	t := &table{title: fmt.Sprintf("8d. Sharded boards: reads on a board of %d players, %d shards vs unsharded, "+
		"%d clients", n, shardCount, shardClients),
		head: []string{"read", "board", "req/s", "p50", "p99", "Redis commands/read (all primaries)",
			"by command (calls/read)", "background commands/read (not counted)", "Redis CPU µs/read (all primaries)",
			"server CPU µs/read", "machine busy, cores (others)", "errors"}}
	cmds := commandTable(fmt.Sprintf("8e. Sharded boards: Redis's time per read by command (%d players), summed "+
		"over the primaries", n), "read", "req")
	for _, rd := range shardReads() {
		sh, pl := &shardSide{label: sharded.label, shards: sharded.shards}, &shardSide{label: plain.label, shards: 1}
		for r := range e.o.Runs {
			sides := []*shardSide{sh, pl}
			if r%2 == 1 {
				slices.Reverse(sides)
			}
			for _, sd := range sides {
				id := ids[sharded]
				if sd == pl {
					id = ids[plain]
				}
				op := func(ctx context.Context, w int, i int64) error {
					_, err := b.sv.hot.post(ctx, w, "", request(rd.query, rd.vars(id, n)))
					return err
				}
				s, err := b.step(ctx, e.stepOf(shardClients), op, nil)
				if err != nil {
					return t, cmds, err
				}
				sd.runs = append(sd.runs, s)
			}
		}
		for _, sd := range []*shardSide{sh, pl} {
			m := medianSample(sd.runs)
			t.add(rd.name, sd.label, fmtRate(m.Rate), fmtDur(m.P50), fmtDur(m.P99),
				fmt.Sprintf("%.2f", shCommandsPerOp(m)), commandsByCalls(m, false), commandsByCalls(m, true),
				fmt.Sprintf("%.1f", shRedisUsPerOp(m)),
				fmt.Sprintf("%.1f", shServerUsPerOp(m)), busy(m), fmtErrs(m))
			addCommandRow(cmds, rd.name, sd.label, sd.runs, 1)
		}
		h := newRawHTTP(b.sv.addr, "/graphql")
		for _, sd := range []*shardSide{sh, pl} {
			id := ids[sharded]
			if sd == pl {
				id = ids[plain]
			}
			sd.probe, err = b.probe(ctx, func(ctx context.Context, i int64) error {
				_, err := h.post(ctx, 0, "", request(rd.query, rd.vars(id, n)))
				return err
			})
			if err != nil {
				h.closeAll()
				return t, cmds, err
			}
		}
		h.closeAll()
		b.addProbeRows(probes, rd.name, sh, pl)
		sent := sh.probe.ratio(pl.probe)
		rc, cc, sc := readRatio(sh.runs, pl.runs, shCommandsPerOp, 0.01), readRatio(sh.runs, pl.runs, shRedisUsPerOp, 0.1),
			readRatio(sh.runs, pl.runs, shServerUsPerOp, 0.1)
		t.add(rd.name, "sharded/unsharded", fmtTimes(medianRatio(sh.runs, pl.runs, reqRate)),
			fmtTimes(medianRatio(sh.runs, pl.runs, func(s Sample) float64 { return float64(s.P50) })),
			fmtTimes(medianRatio(sh.runs, pl.runs, func(s Sample) float64 { return float64(s.P99) })),
			rc.text, "", "", cc.text, sc.text, "", "")
		sh.checkErrs(e, fmt.Sprintf("%s on %d players, sharded vs unsharded", rd.name, n),
			fmt.Sprintf("≤ %.0f× per read: commands sent (MONITOR) and run (commandstats), server CPU, Redis CPU",
				shardReadCost),
			fmt.Sprintf("commands sent %s, run %s, server %s, Redis %s", sent.text, rc.text, sc.text, cc.text),
			sent.ok && rc.ok && cc.ok && sc.ok && medianSample(pl.runs).Errs == 0)
	}
	fresh, okFresh, err := b.topFreshness(ctx, ids[sharded], sharded.shards)
	if err != nil {
		return t, cmds, err
	}
	freshPlain, okPlain, err := b.topFreshness(ctx, ids[plain], 1)
	if err != nil {
		return t, cmds, err
	}
	e.check("shards: a new first place reaches top(first:10) (the server's top cache), a player on each shard",
		fmt.Sprintf("within %s, as on the unsharded board", fmtDur(shardFreshWait)),
		fmt.Sprintf("%s; unsharded %s", fresh, freshPlain), okFresh && okPlain)
	t.notes = append(t.notes, "Through the server (HTTP POST /graphql, the reads scenario's queries), random "+
		"players; the two boards hold the same players and scores (fixture players 0..n-1), loaded through "+
		"Store.SubmitMany in 1000-item calls from 4 goroutines: "+strings.Join(seeds, "; ")+". Before the steps, "+
		fmt.Sprintf("%d ranks, %d aroundMe and the top 10 were read from both boards and compared. ", shardCheckRanks,
			shardCheckArounds)+
		"Redis commands/read: INFO commandstats' calls on every primary over the phase, summed, per read (a "+
		"command a script runs counts on its own line too), without the background commands no read sends: "+
		"SMEMBERS (the server's close checker lists every board every 5 s with one SMEMBERS per hash slot, "+
		"16,384 a pass, whichever step it falls in), CLUSTER … and PING; they are shown apart. Redis CPU: INFO "+
		"cpu of every primary, summed (the background included); server CPU: its /proc; machine busy as in "+
		"table 8b; each pair back to "+
		"back in every run (the first alternating), ratios per run, then the median. A ratio whose unsharded "+
		"figure is about 0 (below 0.01 commands or 0.1 µs a read) is not taken: \"≈0\" when the sharded figure is "+
		"too.")
	return t, cmds, nil
}

// probeResult is what a MONITOR probe saw per operation: commands sent to Redis (without the background ones),
// by name, the primaries they went to, and the commands scripts ran.
type probeResult struct {
	ops          int
	sent, inside float64
	byName       map[string]float64
	primaries    int
}

// probe runs shardProbeOps operations one after another (op(ctx, i)) under MONITOR on every primary.
func (b *shardEnv) probe(ctx context.Context, op func(ctx context.Context, i int64) error) (probeResult, error) {
	counts, err := monitor(ctx, b.cl.addrs, func() error {
		for i := range int64(shardProbeOps) {
			if err := op(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return probeResult{}, fmt.Errorf("MONITOR probe: %w", err)
	}
	r := probeResult{ops: shardProbeOps, byName: map[string]float64{}}
	for _, c := range counts {
		any := false
		for name, k := range c.sent {
			if backgroundCommand(name) || name == "info" {
				continue
			}
			r.sent += float64(k) / shardProbeOps
			r.byName[name] += float64(k) / shardProbeOps
			any = true
		}
		for name, k := range c.inside {
			if !backgroundCommand(name) {
				r.inside += float64(k) / shardProbeOps
			}
		}
		if any {
			r.primaries++
		}
	}
	return r, nil
}

// ratio compares the commands sent per operation with another probe's (readRatio's rules).
func (r probeResult) ratio(base probeResult) readCmp {
	if base.sent < 0.01 {
		if r.sent < 0.01 {
			return readCmp{"≈0 both", true}
		}
		return readCmp{fmt.Sprintf("%.2f vs ≈0", r.sent), false}
	}
	x := r.sent / base.sent
	return readCmp{fmtTimes(x), x <= shardReadCost}
}

// addProbeRows adds an operation's probes of both boards, and their ratio, to the probes table.
func (b *shardEnv) addProbeRows(t *table, name string, sharded, plain *shardSide) {
	for _, sd := range []*shardSide{sharded, plain} {
		p := sd.probe
		var parts []string
		for cmd, v := range p.byName {
			parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(cmd), v))
		}
		slices.Sort(parts)
		by := strings.Join(parts, ", ")
		if by == "" {
			by = "-"
		}
		t.add(name, sd.label, fmt.Sprintf("%.2f", p.sent), by, strconv.Itoa(p.primaries), fmt.Sprintf("%.2f", p.inside))
	}
	t.add(name, "sharded/unsharded", sharded.probe.ratio(plain.probe).text, "", "", "")
}

// shardFreshWait bounds how long topFreshness waits for a write to show in top(first:10).
const shardFreshWait = 3 * time.Second

// topFreshness submits, for each shard of board from the last to shard 0, a player of that shard with a score
// above everybody's, and reads top(first:10) through the server (its top cache) until that player is first, at
// most shardFreshWait: how long each took, and whether every one showed.
func (b *shardEnv) topFreshness(ctx context.Context, board string, shards int) (string, bool, error) {
	h := newRawHTTP(b.sv.addr, "/graphql")
	defer h.closeAll()
	var parts []string
	ok := true
	for k := shards - 1; k >= 0; k-- {
		player := ""
		for n := 0; player == ""; n++ {
			if p := fmt.Sprintf("fresh-%d-%d", k, n); leaderboard.ShardOf(p, shards) == k {
				player = p
			}
		}
		score := float64(2_000_000 + shards - k)
		if _, err := h.post(ctx, 0, submitKey, submitBody(board, player, score)); err != nil {
			return "", false, fmt.Errorf("top freshness: submit to %q: %w", board, err)
		}
		start := time.Now()
		shown := false
		for time.Since(start) < shardFreshWait && !shown {
			data, err := h.post(ctx, 0, "", request(readTopQuery(10), []byte(`{"b":`+strconv.Quote(board)+`}`)))
			if err != nil {
				return "", false, fmt.Errorf("top freshness: read %q: %w", board, err)
			}
			var r struct {
				Data struct {
					Top []struct{ PlayerID string }
				}
			}
			if json.Unmarshal(data, &r) == nil && len(r.Data.Top) > 0 && r.Data.Top[0].PlayerID == player {
				shown = true
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		label := fmt.Sprintf("shard %d: ", k)
		if shards == 1 {
			label = ""
		}
		if shown {
			parts = append(parts, label+fmtDur(max(time.Since(start), time.Microsecond)))
		} else {
			parts = append(parts, label+"not after "+fmtDur(shardFreshWait))
			ok = false
		}
	}
	return strings.Join(parts, ", "), ok, nil
}

// commandsByCalls lists a sample's commands per operation by calls, the most first (those from 0.01 a read):
// the background ones (backgroundCommand) or the others.
func commandsByCalls(m Sample, background bool) string {
	var parts []string
	for _, c := range commandsPerOp(m) {
		if c.calls >= 0.01 && backgroundCommand(c.name) == background {
			parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(c.name), c.calls))
		}
	}
	slices.SortStableFunc(parts, func(a, b string) int {
		fa, _ := strconv.ParseFloat(a[strings.LastIndexByte(a, ' ')+1:], 64)
		fb, _ := strconv.ParseFloat(b[strings.LastIndexByte(b, ' ')+1:], 64)
		switch {
		case fa > fb:
			return -1
		case fa < fb:
			return 1
		}
		return 0
	})
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// readCmp is a sharded/unsharded ratio of a read figure and whether it meets shardReadCost.
type readCmp struct {
	text string
	ok   bool
}

// readRatio is the median of the per-run ratios of f, unless the unsharded figure is about 0 (below floor), where
// a ratio means nothing: then "≈0" and met when the sharded one is about 0 too.
func readRatio(sh, pl []Sample, f func(Sample) float64, floor float64) readCmp {
	ms, mp := f(medianSample(sh)), f(medianSample(pl))
	if mp < floor {
		if ms < floor {
			return readCmp{"≈0 both", true}
		}
		return readCmp{fmt.Sprintf("%.2f vs ≈0", ms), false}
	}
	r := medianRatio(sh, pl, f)
	return readCmp{fmtTimes(r), r > 0 && r <= shardReadCost}
}

// crossCheck reads the top 10, shardCheckRanks ranks and shardCheckArounds aroundMe from both boards through the
// server and compares the answers byte for byte (the boards hold the same players and scores, no ties). It
// returns what it compared and the first difference ("" if none).
func (b *shardEnv) crossCheck(ctx context.Context, sharded, plain string, n int) (string, string, error) {
	read := func(query string, vars map[string]any) (string, error) {
		data, err := b.sv.call(ctx, "", query, vars)
		if err != nil {
			return "", err
		}
		var r struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return "", err
		}
		return string(r.Data), nil
	}
	type q struct {
		name, query, player string
	}
	qs := []q{{"top(first:10)", readTopQuery(10), ""}}
	for range shardCheckRanks {
		qs = append(qs, q{"rank", rankQuery, fixturePlayer(rand.IntN(n))})
	}
	for range shardCheckArounds {
		qs = append(qs, q{"aroundMe", aroundQuery, fixturePlayer(rand.IntN(n))})
	}
	qs = append(qs, q{"rank", rankQuery, fixturePlayer(0)}, q{"rank", rankQuery, "absent-player"})
	for _, x := range qs {
		var got [2]string
		for k, id := range []string{sharded, plain} {
			vars := map[string]any{"b": id}
			if x.player != "" {
				vars["p"] = x.player
			}
			var err error
			if got[k], err = read(x.query, vars); err != nil {
				return "", "", fmt.Errorf("cross-check read of %q: %w", id, err)
			}
		}
		if got[0] != got[1] {
			return fmt.Sprintf("%d reads", len(qs)), fmt.Sprintf("%s of %q: sharded %s, unsharded %s",
				x.name, x.player, truncate(got[0], 200), truncate(got[1], 200)), nil
		}
	}
	return fmt.Sprintf("%d reads (top 10, %d ranks, %d aroundMe, an absent player): identical", len(qs),
		shardCheckRanks+1, shardCheckArounds), "", nil
}

// capacityTable is figure 4: what a board's writes could reach with a core per primary, from the Redis time a
// submission takes on its primary; and how often a board id spreads its shards by itself.
func (b *shardEnv) capacityTable(sharded, plain, wide *shardSide) *table {
	t := &table{title: "8g. Sharded boards: capacity model of one board's writes (submitScore, from table 8b)",
		head: []string{"board", "S", "Redis CPU µs/submission", "per primary (1e6/µs)",
			"ceiling on S primaries: S × per primary", "busiest primary's bound (this cluster)", "script µs/submission",
			"ceiling by script time",
			"server cores at the ceiling", "measured here (2 cores shared)"}}
	for _, sd := range []*shardSide{plain, sharded, wide} {
		m := medianSample(sd.runs)
		us := shRedisUsPerOp(m)
		if us <= 0 || m.Rate <= 0 {
			t.add(sd.label, strconv.Itoa(sd.shards), "-", "-", "-", "-", "-", "-", "-", fmtRate(m.Rate))
			continue
		}
		per := 1e6 / us
		ceiling := float64(sd.shards) * per
		var busiest float64
		for i := range b.nodes {
			busiest = max(busiest, m.Extra[nodeKey(i, "cpu")])
		}
		bound := "-"
		if busiest > 0 {
			bound = fmtRate(m.Rate/busiest) + "/s"
		}
		sc := shScriptUsPerOp(m)
		byScript := "-"
		if sc > 0 {
			byScript = fmtRate(float64(sd.shards)*1e6/sc) + "/s"
		}
		t.add(sd.label, strconv.Itoa(sd.shards), fmt.Sprintf("%.1f", us), fmtRate(per)+"/s", fmtRate(ceiling)+"/s",
			bound, fmt.Sprintf("%.1f", sc), byScript,
			fmt.Sprintf("%.1f", ceiling*shServerUsPerOp(m)/1e6), fmtRate(m.Rate)+"/s")
	}
	// How often a board id puts its shards on distinct primaries by itself (ids "board-0" .. ).
	counts := make([]int, len(b.nodes)+1)
	for k := range shardPlacementIDs {
		counts[distinct(b.placement(fmt.Sprintf("board-%d", k), shardCount))]++
	}
	var spread []string
	for d := len(b.nodes); d >= 1; d-- {
		if counts[d] > 0 {
			spread = append(spread, fmt.Sprintf("%.1f %% have their %d shards on %d primaries",
				100*float64(counts[d])/shardPlacementIDs, shardCount, d))
		}
	}
	t.notes = append(t.notes, fmt.Sprintf("The model: a primary is one Redis process, one core; a submission costs "+
		"its shard's primary the Redis CPU per submission of table 8b (everything the primaries did, summed, over "+
		"the submissions: the arrival counter, the placements and background included), so a primary takes at most 1e6/µs "+
		"submissions a second, and a board of S shards spread evenly over S primaries S times that. \"Busiest "+
		"primary's bound\": the measured rate over the cores the busiest primary of this cluster used for it, the "+
		"ceiling when that primary saturates first (imbalance and shard 0's arrival counter included; for the "+
		"board of 6 shards on these 3 primaries, two shards on each). \"By script time\": S × 1e6 over the "+
		"commandstats time of the script calls per submission, Redis's time without its request and reply "+
		"handling. Both at this load's merging of concurrent submissions into script calls (table 8b). \"Server cores\": the server's CPU per submission (table 8b) at the ceiling: the server scales "+
		"by processes, so the ceiling needs that many cores of servers besides the primaries' S."))
	t.notes = append(t.notes, fmt.Sprintf("This machine cannot show the ceiling: its 2 cores run all %d primaries, "+
		"the server and the load generator, so the throughput measured here cannot grow with S (sharding spreads "+
		"the same CPU over more processes on the same 2 cores); the column \"measured here\" is what they did "+
		"together. The ceiling is a model of a cluster whose primaries each have a core of their own.", len(b.nodes)))
	note := fmt.Sprintf("Placement: of %d board ids (board-0 … board-%d), %s of this cluster (redis-cli "+
		"--cluster create: equal slot ranges; ShardKeyBase puts shard i in the i-th of S equal slot ranges counted "+
		"from shard 0's).", shardPlacementIDs, shardPlacementIDs-1, strings.Join(spread, ", "))
	if counts[min(shardCount, len(b.nodes))] < shardPlacementIDs {
		note += " A board whose shards share a primary gets less: with two of three shards on one primary, that " +
			"primary takes ⅔ of the writes and the ceiling is 1.5 × per primary, not 3 ×. The steps above " +
			"picked ids whose shards are on distinct primaries."
	}
	t.notes = append(t.notes, note)
	return t
}
