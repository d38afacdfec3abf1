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

// workload picks the player and score of call i: even calls bring a new player, odd calls resubmit an earlier
// player with a new random score (on a BEST board about half of those are improvements).
func workload(i int64) (string, float64) {
	if i%2 == 0 || i < 2 {
		return "p" + strconv.FormatInt(i, 10), float64(rand.IntN(1_000_000))
	}
	return "p" + strconv.FormatInt(2*rand.Int64N(i/2), 10), float64(rand.IntN(1_000_000))
}

// runSubmit (issue scenario 1): submitScore over HTTP at 8, 32 and 128 clients against the submit script called
// directly through Store.Submit (one EVALSHA per submission, go-redis pool: one connection per goroutine) at
// the same concurrency. Every step writes to a fresh board.
func runSubmit(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	t := &table{title: "1. Single submissions: submitScore over HTTP vs the script (Store.Submit)",
		head: []string{"clients", "service req/s", "p50", "p99", "p999", "raw req/s", "raw p50", "raw p99",
			"service/raw", "server CPU", "CPU µs/req svc (server/redis/loadgen)", "CPU µs/req raw (redis/loadgen)",
			"errors"}}
	t.notes = append(t.notes, "Closed loop: each client waits for its reply. Raw = leaderboard.Store.Submit, the same "+
		"Lua script with the same arguments, from as many goroutines. CPU from /proc: server in cores; per request "+
		"in µs of CPU of each process (the three share the machine's cores).")
	for _, c := range e.sizes().SubmitClients {
		var svc, raw []Sample
		for r := 0; r < e.o.Runs; r++ {
			sb, rb := fmt.Sprintf("submit-svc-%d-%d", c, r), fmt.Sprintf("submit-raw-%d-%d", c, r)
			for _, b := range []string{sb, rb} {
				if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: b}); err != nil {
					return []*table{t}, err
				}
			}
			if r == 0 {
				e.profileNext(fmt.Sprintf("submit-%d", c))
			}
			svc = append(svc, e.step(ctx, e.stepOf(c), func(ctx context.Context, w int, i int64) error {
				p, s := workload(i)
				_, err := e.hot.post(ctx, w, submitKey, request(submitMutation,
					append(scoreInput([]byte(`{"in":`), sb, p, s), '}')))
				return err
			}))
			raw = append(raw, e.step(ctx, e.stepOf(c), func(ctx context.Context, w int, i int64) error {
				p, s := workload(i)
				_, err := e.store.Submit(ctx, leaderboard.Submission{Board: rb, Player: p, Score: s})
				return err
			}))
		}
		s, rw := medianSample(svc), medianSample(raw)
		ratio := medianRatio(svc, raw, func(s Sample) float64 { return s.Rate })
		errs := s
		errs.Errs += rw.Errs
		if errs.FirstErr == "" {
			errs.FirstErr = rw.FirstErr
		}
		t.add(fmt.Sprint(c), fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.P999), fmtRate(rw.Rate),
			fmtDur(rw.P50), fmtDur(rw.P99), fmtRatio(ratio), fmtCores(s.CPU), cpuPerOp(s, true),
			cpuPerOp(rw, false), fmtErrs(errs))
		if c == 32 {
			e.check("single submissions at 32 clients", "≥ 10,000 req/s, p99 < 15 ms",
				fmt.Sprintf("%s req/s, p99 %s", fmtRate(s.Rate), fmtDur(s.P99)),
				s.Rate >= 10_000 && s.P99 < 15*time.Millisecond && s.Errs == 0)
		}
	}
	return []*table{t}, nil
}

// runBulk (issue scenario 2): submitScores with 100 and 1000 items (one board per call, half new players) against
// Store.SubmitMany with the same items, at the same concurrency; scores per second.
func runBulk(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	sz := e.sizes()
	t := &table{title: fmt.Sprintf("2. Bulk: submitScores vs the script (Store.SubmitMany), %d concurrent callers", sz.BulkClients),
		head: []string{"items/call", "service scores/s", "p50", "p99", "raw scores/s", "raw p50", "raw p99",
			"service/raw", "server CPU", "CPU µs/call svc (server/redis/loadgen)", "CPU µs/call raw (redis/loadgen)",
			"errors"}}
	for _, n := range sz.BulkSizes {
		var svc, raw []Sample
		for r := 0; r < e.o.Runs; r++ {
			sb, rb := fmt.Sprintf("bulk-svc-%d-%d", n, r), fmt.Sprintf("bulk-raw-%d-%d", n, r)
			for _, b := range []string{sb, rb} {
				if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: b}); err != nil {
					return []*table{t}, err
				}
			}
			if r == 0 {
				e.profileNext(fmt.Sprintf("bulk-%d", n))
			}
			s := e.step(ctx, e.stepOf(sz.BulkClients), func(ctx context.Context, w int, i int64) error {
				vars := []byte(`{"in":[`)
				for k := 0; k < n; k++ {
					if k > 0 {
						vars = append(vars, ',')
					}
					p, sc := workload(i*int64(n) + int64(k))
					vars = scoreInput(vars, sb, p, sc)
				}
				vars = append(vars, "]}"...)
				_, err := e.hot.post(ctx, w, submitKey, request(bulkMutation, vars))
				return err
			})
			s.ItemsPerOp = n
			svc = append(svc, s)
			rs := e.step(ctx, e.stepOf(sz.BulkClients), func(ctx context.Context, w int, i int64) error {
				subs := make([]leaderboard.Submission, n)
				for k := range subs {
					p, sc := workload(i*int64(n) + int64(k))
					subs[k] = leaderboard.Submission{Board: rb, Player: p, Score: sc}
				}
				out, err := e.store.SubmitMany(ctx, subs)
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
		s, rw := medianSample(svc), medianSample(raw)
		ratio := medianRatio(svc, raw, Sample.ItemRate)
		errs := s
		errs.Errs += rw.Errs
		if errs.FirstErr == "" {
			errs.FirstErr = rw.FirstErr
		}
		t.add(fmt.Sprint(n), fmtRate(s.ItemRate()), fmtDur(s.P50), fmtDur(s.P99), fmtRate(rw.ItemRate()),
			fmtDur(rw.P50), fmtDur(rw.P99), fmtRatio(ratio), fmtCores(s.CPU), cpuPerOp(s, true),
			cpuPerOp(rw, false), fmtErrs(errs))
		e.check(fmt.Sprintf("bulk %d items", n), "≥ 60% of raw", fmtRatio(ratio), ratio >= 0.6 && s.Errs == 0)
	}
	return []*table{t}, nil
}
