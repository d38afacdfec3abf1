package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

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
	// The read boards (readsTables), by their shards: ids, primaries of their shards, and players.
	readIDs     map[int]string
	readPlace   map[int][]int
	readPlayers int
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

// shardSide is one board of a step: the sharded or the unsharded one.
type shardSide struct {
	label  string
	shards int
	runs   []Sample
	place  []int  // primary of each shard (of the last run's board)
	board  string // the last run's board
	probe  probeResult
	doc    string // the submit mutation of its write steps
	// clients of its write steps: shardClients when 0. A sharded side with shardClients × S has as many clients
	// a shard as the unsharded board has, so each primary sees the load and the merging of one unsharded board.
	clients int
}

// writers is the side's closed-loop clients in its write steps.
func (sd *shardSide) writers() int {
	if sd.clients > 0 {
		return sd.clients
	}
	return shardClients
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
	sharded := &shardSide{label: fmt.Sprintf("%d shards", shardCount), shards: shardCount, doc: submitMutation}
	plain := &shardSide{label: "unsharded", shards: 1, doc: submitMutation}

	// A board of twice as many shards as primaries (two on each), for the writes only: how Redis's time per
	// submission, and so the ceiling, moves with S.
	wide := &shardSide{label: fmt.Sprintf("%d shards", 2*shardCount), shards: 2 * shardCount, doc: submitMutation}
	// The sharded board again with as many clients a shard as the unsharded board has: each primary's load.
	even := &shardSide{label: fmt.Sprintf("%d shards, %d clients (%d a shard)", shardCount, shardClients*shardCount,
		shardClients), shards: shardCount, doc: submitMutation, clients: shardClients * shardCount}

	// Writes: a fresh board of each kind in every run, the first of them rotating.
	for r := range e.o.Runs {
		sides := []*shardSide{sharded, plain, wide, even}
		if r%2 == 1 {
			sides = []*shardSide{plain, even, sharded, wide}
		}
		if r%3 == 2 {
			sides = []*shardSide{wide, even, sharded, plain}
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
			s, err := b.step(ctx, e.stepOf(sd.writers()), rt.submitOp(b.sv, id, sd.doc), rt)
			if err != nil {
				return tables, err
			}
			sd.runs = append(sd.runs, s)
			e.logf("shards: writes, %s (board %q on primaries %v): %.0f submissions/s, Redis %.1f µs and server %.1f µs a submission",
				sd.label, id, place, s.Rate, shRedisUsPerOp(s), shServerUsPerOp(s))
		}
	}
	tables = append(tables, b.perPrimaryTable(sharded, plain), b.perSubmissionTable(sharded, plain, wide, even))
	probes := &table{title: fmt.Sprintf("8f. Sharded boards: commands sent to Redis per operation (MONITOR on every "+
		"primary, %d operations one after another), %d shards vs unsharded", shardProbeOps, shardCount),
		head: []string{"operation", "board", "commands sent/op", "by command", "primaries", "commands scripts ran/op"}}
	for _, sd := range []*shardSide{sharded, plain} {
		rt := newRouted(sd.shards, sd.place)
		op := rt.submitOp(b.sv, sd.board, sd.doc)
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
		"shardranks.go, shardaround.go): a submission to a sharded board makes three in a row (a block of arrival numbers from "+
		"shard 0, unless a block being taken covers it; the submit script on the player's shard; its placement "+
		"on the other shards, in parallel), rank and aroundMe (these queries ask no tie rank) three without a "+
		"script (the player's record and a snapshot of its shard, then every shard in parallel), top one (every shard in parallel) when the server's top cache "+
		"does not answer it.")
	cmds := commandTable("8c. Sharded boards: Redis's time per submission by command, summed over the primaries",
		"board", "submission")
	for _, sd := range []*shardSide{sharded, plain, wide, even} {
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
	big, bigCmds, bigSides, err := b.bigWritesTables(ctx)
	if err != nil {
		return tables, err
	}
	tables = append(tables, big, bigCmds, probes, b.capacityTable(append([]*shardSide{plain, sharded, wide, even}, bigSides...)...))
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
func (b *shardEnv) perSubmissionTable(sharded, plain, wide, even *shardSide) *table {
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
	ratioRow := func(label string, sh, pl *shardSide) (script, redisCPU float64) {
		ratio := func(f func(Sample) float64) float64 { return medianRatio(sh.runs, pl.runs, f) }
		script, redisCPU = ratio(shScriptUsPerOp), ratio(shRedisUsPerOp)
		t.add(label, fmtTimes(ratio(reqRate)), fmtTimes(ratio(func(s Sample) float64 { return float64(s.P50) })),
			fmtTimes(ratio(func(s Sample) float64 { return float64(s.P99) })), fmtTimes(ratio(shScriptsPerOp)),
			fmtTimes(ratio(shScriptUsecCall)), fmtTimes(script), fmtTimes(redisCPU),
			fmtTimes(ratio(shServerUsPerOp)), fmtTimes(ratio(shGenUsPerOp)), "", "")
		return script, redisCPU
	}
	row(sharded)
	row(plain)
	script, redisCPU := ratioRow("sharded/unsharded", sharded, plain)
	row(wide)
	row(even)
	_, evenCPU := ratioRow(fmt.Sprintf("%d a shard/unsharded", shardClients), even, plain)
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
	sharded.checkErrs(b.e, "Redis CPU a submission to a fresh board (all primaries: arrival counter and placements included), sharded vs unsharded",
		fmt.Sprintf("≤ %.1f×", shardWriteCost),
		fmt.Sprintf("%s (%.1f vs %.1f µs)", fmtTimes(redisCPU), shRedisUsPerOp(sm), shRedisUsPerOp(pm)),
		redisCPU > 0 && redisCPU <= shardWriteCost && pm.Errs == 0)
	even.checkErrs(b.e, fmt.Sprintf("Redis CPU a submission to a fresh board, %d clients a shard (each primary "+
		"loaded as the unsharded board's), sharded vs unsharded", shardClients), fmt.Sprintf("≤ %.1f×", shardWriteCost),
		fmt.Sprintf("%s (%.1f vs %.1f µs)", fmtTimes(evenCPU), shRedisUsPerOp(medianSample(even.runs)),
			shRedisUsPerOp(pm)), evenCPU > 0 && evenCPU <= shardWriteCost && pm.Errs == 0)
	return t
}
