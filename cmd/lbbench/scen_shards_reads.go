package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// The sharded-boards scenario's reads: the read steps on boards of a million players, the MONITOR probes of the
// commands an operation sends, the freshness of top lists, and the cross-check of both boards' answers.

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
	b.readIDs = map[int]string{1: ids[plain], sharded.shards: ids[sharded]}
	b.readPlace = map[int][]int{1: plain.place, sharded.shards: sharded.place}
	b.readPlayers = n
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
