package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// What one sharded board's writes could reach (scenario 8, scen_shards.go): submitScore on the 1,000,000-player
// read boards with the ranks asked and without (tables 8h, 8i), and the capacity model over every write side (8g).

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
	// Both kinds again on the sharded board with as many clients a shard as the unsharded board has.
	evenOf := func(sd *shardSide) *shardSide {
		o := *sd
		o.label += fmt.Sprintf(", %d clients (%d a shard)", shardClients*shardCount, shardClients)
		o.clients = shardClients * shardCount
		return &o
	}
	asked = append(asked, evenOf(asked[0]))
	quiet = append(quiet, evenOf(quiet[0]))
	for r := range e.o.Runs {
		for _, pair := range [][]*shardSide{asked, quiet} {
			order := []*shardSide{pair[0], pair[1], pair[2]}
			if r%2 == 1 {
				order = []*shardSide{pair[1], pair[2], pair[0]}
			}
			for _, sd := range order {
				rt := newRouted(sd.shards, sd.place)
				s, err := b.step(ctx, e.stepOf(sd.writers()), rt.submitOp(b.sv, sd.board, sd.doc), rt)
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
	var ratios, evenRatios [2]float64
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
		ev := func(f func(Sample) float64) float64 { return medianRatio(pair[2].runs, pair[1].runs, f) }
		evenRatios[k] = ev(shRedisUsPerOp)
		t.add(fmt.Sprintf("%d a shard/unsharded", shardClients), fmtTimes(ev(reqRate)),
			fmtTimes(ev(func(s Sample) float64 { return float64(s.P50) })),
			fmtTimes(ev(func(s Sample) float64 { return float64(s.P99) })), fmtTimes(ev(shScriptsPerOp)), "",
			fmtTimes(evenRatios[k]), fmtTimes(ev(shServerUsPerOp)), "", "")
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
		pair[2].checkErrs(e, fmt.Sprintf("Redis CPU a submission %s to a board of %d players, %d clients a shard "+
			"(each primary loaded as the unsharded board's), sharded vs unsharded", name, n, shardClients),
			fmt.Sprintf("≤ %.1f×", shardWriteCost),
			fmt.Sprintf("%s (%.1f vs %.1f µs)", fmtTimes(evenRatios[k]), shRedisUsPerOp(medianSample(pair[2].runs)),
				shRedisUsPerOp(pm)), evenRatios[k] > 0 && evenRatios[k] <= shardWriteCost && pm.Errs == 0)
	}
	return t, cmds, quiet, nil
}

// capacityTable is table 8g: what a board's writes could reach with a core per primary, from the Redis time a
// submission takes on its primary (each side's), and how often a board id spreads its shards by itself.
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
