package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// submitMutation asks for what a game server typically reads back.
const submitMutation = `mutation($in: ScoreInput!) { submitScore(input: $in) { entry { rank score } previousRank updated } }`

// bulkMutation is the bulk form.
const bulkMutation = `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { rank } updated } }`

// bulkOp submits n items of the workload (call i's are workload(i*n) .. workload(i*n+n-1)) to board in one
// submitScores through sv's API.
func bulkOp(sv *service, board string, n int) Op {
	return func(ctx context.Context, w int, i int64) error {
		vars := []byte(`{"in":[`)
		for k := 0; k < n; k++ {
			if k > 0 {
				vars = append(vars, ',')
			}
			p, sc := workload(i*int64(n) + int64(k))
			vars = scoreInput(vars, board, p, sc)
		}
		vars = append(vars, "]}"...)
		_, err := sv.hot.post(ctx, w, submitKey, request(bulkMutation, vars))
		return err
	}
}

// rawFields and rawBulkFields are what the server asks its store for with submitMutation's and bulkMutation's
// selections (no tieRank, no names; previousRank only in the first): the raw side does the same script work.
var (
	rawFields     = leaderboard.Only(leaderboard.FieldPreviousRank)
	rawBulkFields = leaderboard.Only(0)
)

// workload picks the player and score of call i: even calls bring a new player, odd calls resubmit an earlier
// player with a new random score (on a BEST board about half of those are improvements).
func workload(i int64) (string, float64) {
	if i%2 == 0 || i < 2 {
		return "p" + strconv.FormatInt(i, 10), float64(rand.IntN(1_000_000))
	}
	return "p" + strconv.FormatInt(2*rand.Int64N(i/2), 10), float64(rand.IntN(1_000_000))
}

// submitBody is the request body of one submitScore.
func submitBody(board, player string, score float64) []byte {
	return submitBodyOf(submitMutation, board, player, score)
}

// submitBodyOf is submitBody with another document of one ScoreInput $in.
func submitBodyOf(doc, board, player string, score float64) []byte {
	return request(doc, append(scoreInput([]byte(`{"in":`), board, player, score), '}'))
}

// submitNoRankMutation is submitMutation without the ranks: what a game server that only records results reads
// back (a sharded board then does not place the submission on its other shards).
const submitNoRankMutation = `mutation($in: ScoreInput!) { submitScore(input: $in) { entry { score } updated } }`

// submitOp submits workload(i) to board through sv's API.
func submitOp(sv *service, board string) Op {
	return func(ctx context.Context, w int, i int64) error {
		p, s := workload(i)
		_, err := sv.hot.post(ctx, w, submitKey, submitBody(board, p, s))
		return err
	}
}

// rawNote explains the raw side of the submit and bulk tables.
func (e *env) rawNote(workers int, what string) string {
	client := "go-redis's AutoPipeliner (client.AutoPipeline(), default options: batches of up to 300 commands, " +
		"one ordered stream) passed to leaderboard.New as its redis.UniversalClient"
	if e.rawAP == nil {
		client = "the 512-connection go-redis pool (the AutoPipeliner was not available)"
	}
	return fmt.Sprintf("%s = leaderboard.%s on %s, from %d goroutines: the same Lua script with the arguments the "+
		"server's own code builds for the mutations' selections (rawFields, rawBulkFields), many calls in flight (the store's own batcher, Config.BatchLanes, is left off: "+
		"the pipelining is go-redis's). The physical limit of the script on this machine, not a same-concurrency "+
		"comparison: its latency is that of a deep queue.", e.rawLabel, what, client, workers)
}

// runSubmit (issue scenario 1): submitScore over HTTP at each client count against the physical limit: the submit
// script through the exported Store over a pipelined client with rawWorkers goroutines. Every step writes to a
// fresh board. With -baseline both servers run each step in alternating rounds.
func runSubmit(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	rw := e.rawWorkers()
	title := fmt.Sprintf("1. Single submissions: submitScore over HTTP vs %s (Store.Submit, %d goroutines)", e.rawLabel, rw)
	var t *table
	var ct *cmpTable
	if e.baseline() {
		ct = e.cmpTable(title, "clients", "req/s", "req", []string{"raw"})
		t = ct.table
	} else {
		t = &table{title: title,
			head: []string{"clients", "service req/s", "p50", "p99", "p999", "raw req/s", "raw p50", "raw p99",
				"service/raw", "server CPU", "CPU µs/req svc (server/redis/loadgen)", "CPU µs/req raw (redis/loadgen)",
				"errors"}}
		t.notes = append(t.notes, "Closed loop: each client waits for its reply. CPU from /proc: server in cores; "+
			"per request in µs of CPU of each process (the three share the machine's cores).")
	}
	t.notes = append(t.notes, e.rawNote(rw, "Store.Submit"))
	cmds := commandTable("1b. Single submissions: Redis's time per submission by command", "clients", "req")
	var p99At32, floorP99At32 time.Duration
	for _, c := range e.sizes().SubmitClients {
		svc := make([][]Sample, len(e.svcs))
		var raw, fl []Sample
		for r := 0; r < e.o.Runs; r++ {
			for _, k := range e.roundOrder(r) {
				sv := e.svcs[k]
				board := fmt.Sprintf("submit-%s-%d-%d", sv.name, c, r)
				if err := e.createBoardOn(ctx, sv, board, 0); err != nil {
					return []*table{t, cmds}, err
				}
				if r == 0 && k == 0 {
					e.profileNext(fmt.Sprintf("submit-%d", c))
				}
				svc[k] = append(svc[k], e.stepOn(ctx, sv, e.stepOf(c), submitOp(sv, board)))
			}
			if e.floor != nil {
				// The floor answers what the new server answered to a submission on its board of this round.
				board := fmt.Sprintf("submit-%s-%d-%d", e.newSvc().name, c, r)
				p, s := workload(0)
				f, err := e.floorSide(ctx, e.stepOf(c), submitBody(board, p+"-floor", s), submitKey,
					func(sv *service) Op { return submitOp(sv, board) })
				if err != nil {
					return []*table{t, cmds}, err
				}
				fl = append(fl, f)
			}
			rb := fmt.Sprintf("submit-raw-%d-%d", c, r)
			if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: rb}); err != nil {
				return []*table{t, cmds}, err
			}
			raw = append(raw, e.stepOn(ctx, nil, e.stepOf(rw), func(ctx context.Context, w int, i int64) error {
				p, s := workload(i)
				_, err := e.rawStore.Submit(ctx, leaderboard.Submission{Board: rb, Player: p, Score: s}, rawFields)
				return err
			}))
		}
		for k, label := range e.sideLabels() {
			addCommandRow(cmds, fmt.Sprint(c), label, svc[k], 1)
		}
		addCommandRow(cmds, fmt.Sprint(c), "raw", raw, 1)
		s, rs := medianSample(svc[0]), medianSample(raw)
		ratio := medianRatio(svc[0], raw, func(s Sample) float64 { return s.Rate })
		if ct != nil {
			ct.add(fmt.Sprint(c), svc[0], svc[1], e.withFloor([]side{{label: e.rawLabel, short: "raw", runs: raw}}, fl),
				reqRate)
		} else {
			t.add(fmt.Sprint(c), fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.P999), fmtRate(rs.Rate),
				fmtDur(rs.P50), fmtDur(rs.P99), fmtRatio(ratio), fmtCores(s.CPU), cpuPerOp(s, true),
				cpuPerOp(rs, false), fmtErrs(sumErrs(s, rs)))
		}
		switch {
		case ct == nil && c == 32:
			e.check("single submissions at 32 clients", "≥ 10,000 req/s, p99 < 15 ms",
				fmt.Sprintf("%s req/s, p99 %s", fmtRate(s.Rate), fmtDur(s.P99)),
				s.Rate >= 10_000 && s.P99 < 15*time.Millisecond && s.Errs == 0)
		case ct != nil && c == 32:
			v := compareBase(svc[0], svc[1], reqRate)
			v.ceiling = medianRatio(fl, svc[1], reqRate)
			p99At32 = s.P99
			if len(fl) > 0 {
				floorP99At32 = medianSample(fl).P99
			}
			server, redis := perOp(s, s.CPU), perOp(s, s.Extra["redis_cpu"])
			e.check("submitScore, 32 clients",
				fmt.Sprintf("≥ %.1f× base, p99 ≤ %s, server ≤ %.0f µs, Redis ≤ %.0f µs", submitSpeedup,
					fmtDur(time.Duration(submitP99)), submitServerCPU, submitRedisCPU),
				fmt.Sprintf("%s, p99 %s, server %.0f µs, Redis %.0f µs", v.text(), fmtDur(s.P99), server, redis),
				v.ratio >= submitSpeedup && float64(s.P99) <= submitP99 && server <= submitServerCPU &&
					redis <= submitRedisCPU && s.Errs == 0)
		case ct != nil && c == 128:
			v := compareBase(svc[0], svc[1], reqRate)
			goal := fmt.Sprintf("≥ 1.0× base, p99 ≤ %.0f× the 32-client p99", p99Growth)
			measured := fmt.Sprintf("%s, p99 %s", fmtTimes(v.ratio), fmtDur(s.P99))
			ok := v.ratio >= 1 && s.Errs == 0
			if p99At32 > 0 {
				measured += fmt.Sprintf(" (%.1f× %s)", float64(s.P99)/float64(p99At32), fmtDur(p99At32))
				ok = ok && float64(s.P99) <= p99Growth*float64(p99At32)
			}
			if floorP99At32 > 0 {
				// The floor's own growth: what net/http and the machine give any server at 128 clients.
				f := medianSample(fl)
				measured += fmt.Sprintf("; floor p99 %s (%.1f× its %s)", fmtDur(f.P99),
					float64(f.P99)/float64(floorP99At32), fmtDur(floorP99At32))
			}
			e.check("submitScore, 128 clients", goal, measured, ok)
		}
	}
	return []*table{t, cmds}, nil
}

// runBulk (issue scenario 2): submitScores with each bulk size (one board per call, half new players) at each
// caller count, against Store.SubmitMany with the same items over the pipelined client (rawBulkWorkers calls in
// flight); scores per second. With -baseline both servers run each step in alternating rounds.
func runBulk(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	sz := e.sizes()
	title := fmt.Sprintf("2. Bulk: submitScores vs %s (Store.SubmitMany, %d calls in flight)", e.rawLabel, rawBulkWorkers)
	var t *table
	var ct *cmpTable
	if e.baseline() {
		ct = newCmpTable(title, "items/call × callers", "scores/s", "call", []string{"raw"})
		t = ct.table
	} else {
		t = &table{title: title,
			head: []string{"items/call", "callers", "service scores/s", "p50", "p99", "raw scores/s", "raw p50",
				"raw p99", "service/raw", "server CPU", "CPU µs/call svc (server/redis/loadgen)",
				"CPU µs/call raw (redis/loadgen)", "errors"}}
	}
	t.notes = append(t.notes, e.rawNote(rawBulkWorkers, "Store.SubmitMany (one script call per call)"))
	cmds := commandTable("2b. Bulk: Redis's time per item by command", "items/call × callers", "item")
	for _, n := range sz.BulkSizes {
		for _, callers := range sz.BulkClients {
			svc := make([][]Sample, len(e.svcs))
			var raw []Sample
			for r := 0; r < e.o.Runs; r++ {
				for _, k := range e.roundOrder(r) {
					sv := e.svcs[k]
					board := fmt.Sprintf("bulk-%s-%d-%d-%d", sv.name, n, callers, r)
					if err := e.createBoardOn(ctx, sv, board, 0); err != nil {
						return []*table{t, cmds}, err
					}
					if r == 0 && k == 0 {
						e.profileNext(fmt.Sprintf("bulk-%d-%d", n, callers))
					}
					s := e.stepOn(ctx, sv, e.stepOf(callers), bulkOp(sv, board, n))
					s.ItemsPerOp = n
					svc[k] = append(svc[k], s)
				}
				rb := fmt.Sprintf("bulk-raw-%d-%d-%d", n, callers, r)
				if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: rb}); err != nil {
					return []*table{t, cmds}, err
				}
				rs := e.stepOn(ctx, nil, e.stepOf(rawBulkWorkers), func(ctx context.Context, w int, i int64) error {
					subs := make([]leaderboard.Submission, n)
					for k := range subs {
						p, sc := workload(i*int64(n) + int64(k))
						subs[k] = leaderboard.Submission{Board: rb, Player: p, Score: sc}
					}
					out, err := e.rawStore.SubmitMany(ctx, subs, rawBulkFields)
					if err == nil {
						for _, o := range out {
							if o.Err != nil {
								return o.Err
							}
						}
					}
					return err
				})
				rs.ItemsPerOp = n
				raw = append(raw, rs)
			}
			key := fmt.Sprintf("%d × %d", n, callers)
			for k, label := range e.sideLabels() {
				addCommandRow(cmds, key, label, svc[k], n)
			}
			addCommandRow(cmds, key, "raw", raw, n)
			s, rs := medianSample(svc[0]), medianSample(raw)
			ratio := medianRatio(svc[0], raw, Sample.ItemRate)
			if ct != nil {
				ct.add(fmt.Sprintf("%d × %d", n, callers), svc[0], svc[1],
					[]side{{label: e.rawLabel, short: "raw", runs: raw}}, Sample.ItemRate)
			} else {
				t.add(fmt.Sprint(n), fmt.Sprint(callers), fmtRate(s.ItemRate()), fmtDur(s.P50), fmtDur(s.P99),
					fmtRate(rs.ItemRate()), fmtDur(rs.P50), fmtDur(rs.P99), fmtRatio(ratio), fmtCores(s.CPU),
					cpuPerOp(s, true), cpuPerOp(rs, false), fmtErrs(sumErrs(s, rs)))
			}
			if ct == nil {
				e.check(fmt.Sprintf("bulk %d items, %d callers", n, callers), "≥ 60% of raw (pipelined Store)",
					fmtRatio(ratio), ratio >= 0.6 && s.Errs == 0)
				continue
			}
			v := compareBase(svc[0], svc[1], Sample.ItemRate)
			e.check(fmt.Sprintf("submitScores, %d items, %d callers", n, callers),
				fmt.Sprintf("≥ %.1f× base, ≥ %.0f%% of raw", bulkSpeedup, 100*bulkOfRaw),
				fmt.Sprintf("%s, %s of raw", fmtTimes(v.ratio), fmtRatio(ratio)),
				v.ratio >= bulkSpeedup && ratio >= bulkOfRaw && s.Errs == 0)
		}
	}
	return []*table{t, cmds}, nil
}
