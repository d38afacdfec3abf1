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
			s, err := b.step(ctx, e.stepOf(shardClients), rt.submitOp(b.sv, id, sd.doc), rt)
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
	big, bigCmds, bigSides, err := b.bigWritesTables(ctx)
	if err != nil {
		return tables, err
	}
	tables = append(tables, big, bigCmds, probes, b.capacityTable(append([]*shardSide{plain, sharded, wide}, bigSides...)...))
	return tables, nil
}

// bigWritesTables measures submitScore on the read boards (shardPlayersFull players: a board big enough to need
// shards), with the ranks asked and without, each pair back to back in every run. Without ranks a sharded board
// places a submission on its other shards only near the top of its shard (leaderboard.FieldRank), so the write
// costs its shard and the arrival counter. It returns the sides of the writes without ranks for the capacity model.
func (b *shardEnv) bigWritesTables(ctx context.Context) (*table, *table, []*shardSide, error) {
	e := b.e
	n := b.readPlayers
	side := func(label string, shards int, doc string) *shardSide {
		return &shardSide{label: label, shards: shards, doc: doc, board: b.readIDs[shards], place: b.readPlace[shards]}
	}
	big := fmt.Sprintf(" (%d players)", n)
	asked := []*shardSide{side(fmt.Sprintf("%d shards%s, ranks asked", shardCount, big), shardCount, submitMutation),
		side("unsharded"+big+", ranks asked", 1, submitMutation)}
	quiet := []*shardSide{side(fmt.Sprintf("%d shards%s, no rank asked", shardCount, big), shardCount, submitNoRankMutation),
		side("unsharded"+big+", no rank asked", 1, submitNoRankMutation)}
	for r := range e.o.Runs {
		for _, pair := range [][]*shardSide{asked, quiet} {
			order := []*shardSide{pair[0], pair[1]}
			if r%2 == 1 {
				order = []*shardSide{pair[1], pair[0]}
			}
			for _, sd := range order {
				rt := newRouted(sd.shards, sd.place)
				s, err := b.step(ctx, e.stepOf(shardClients), rt.submitOp(b.sv, sd.board, sd.doc), rt)
				if err != nil {
					return nil, nil, nil, err
				}
				sd.runs = append(sd.runs, s)
				e.logf("shards: writes, %s: %.0f submissions/s, Redis %.1f µs and server %.1f µs a submission",
					sd.label, s.Rate, shRedisUsPerOp(s), shServerUsPerOp(s))
			}
		}
	}
	t := &table{title: fmt.Sprintf("8h. Sharded boards: Redis's time per submission to a board of %d players, "+
		"ranks asked and not (submitScore, %d clients)", n, shardClients),
		head: []string{"board", "submissions/s", "p50", "p99", "script calls/submission", "placement commands/submission",
			"Redis CPU µs/submission (all primaries)", "server CPU µs/submission", "machine busy, cores (others)", "errors"}}
	placements := func(m Sample) float64 {
		var calls float64
		for _, c := range []string{"zcount", "zrange", "zcard"} {
			calls += m.Extra[extraCmdCalls+c]
		}
		return calls / m.Rate
	}
	cmds := commandTable(fmt.Sprintf("8i. Sharded boards: Redis's time per submission by command (%d players), "+
		"summed over the primaries", n), "board", "submission")
	var ratios [2]float64
	for k, pair := range [][]*shardSide{asked, quiet} {
		for _, sd := range pair {
			m := medianSample(sd.runs)
			t.add(sd.label, fmtRate(m.Rate), fmtDur(m.P50), fmtDur(m.P99), fmt.Sprintf("%.2f", shScriptsPerOp(m)),
				fmt.Sprintf("%.2f", placements(m)), fmt.Sprintf("%.1f", shRedisUsPerOp(m)),
				fmt.Sprintf("%.1f", shServerUsPerOp(m)), busy(m), fmtErrs(m))
			addCommandRow(cmds, "submitScore", sd.label, sd.runs, 1)
		}
		ratio := func(f func(Sample) float64) float64 { return medianRatio(pair[0].runs, pair[1].runs, f) }
		ratios[k] = ratio(shRedisUsPerOp)
		t.add("sharded/unsharded", fmtTimes(ratio(reqRate)), fmtTimes(ratio(func(s Sample) float64 { return float64(s.P50) })),
			fmtTimes(ratio(func(s Sample) float64 { return float64(s.P99) })), fmtTimes(ratio(shScriptsPerOp)), "",
			fmtTimes(ratios[k]), fmtTimes(ratio(shServerUsPerOp)), "", "")
	}
	t.notes = append(t.notes, fmt.Sprintf("The read boards of table 8d after their reads, written by the same "+
		"load as table 8b (new players half the time, random scores): ranks asked is `%s`; no rank asked is `%s`, "+
		"whose submissions a sharded board places on its other shards only when the player is within the first "+
		"1000 of its shard before or after. Placement commands: ZCOUNT, ZRANGE and ZCARD calls (commandstats, "+
		"all primaries, those scripts run included) per submission. Each pair back to back in every run (the first alternating), medians, the "+
		"ratio rows the median of the per-run ratios; Redis CPU and the rest as in table 8b.", submitMutation,
		submitNoRankMutation))
	for k, name := range []string{"with its ranks", "that asks no rank (its shard and the arrival counter)"} {
		pair := [][]*shardSide{asked, quiet}[k]
		pm := medianSample(pair[1].runs)
		pair[0].checkErrs(e, fmt.Sprintf("Redis CPU a submission %s to a board of %d players, sharded vs unsharded",
			name, n), fmt.Sprintf("≤ %.1f×", shardWriteCost),
			fmt.Sprintf("%s (%.1f vs %.1f µs)", fmtTimes(ratios[k]), shRedisUsPerOp(medianSample(pair[0].runs)),
				shRedisUsPerOp(pm)), ratios[k] > 0 && ratios[k] <= shardWriteCost && pm.Errs == 0)
	}
	return t, cmds, quiet, nil
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
	return t
}

// submission takes on its primary; and how often a board id spreads its shards by itself.
func (b *shardEnv) capacityTable(sides ...*shardSide) *table {
	t := &table{title: "8g. Sharded boards: capacity model of one board's writes (submitScore, from tables 8b and 8h)",
		head: []string{"board", "S", "Redis CPU µs/submission", "per primary (1e6/µs)",
			"ceiling on S primaries: S × per primary", "busiest primary's bound (this cluster)", "script µs/submission",
			"ceiling by script time",
			"server cores at the ceiling", "measured here (2 cores shared)"}}
	for _, sd := range sides {
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
		"its shard's primary the Redis CPU per submission of table 8b or 8h (everything the primaries did, summed, over "+
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
