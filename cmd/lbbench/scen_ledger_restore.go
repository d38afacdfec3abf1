package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// The ledger scenario's restore (table 7b): a board Redis lost, restored from the ledger while other boards are
// written. Twice: with closed-loop writers (each sends its next submission when the last is answered, so their
// rate is what the machine's spare time and their latency allow), then with writers offered a fixed rate, open
// loop as game servers send (a submission when a match ends, whatever the last one's latency), at
// ledgerOthersKeepShare of the closed-loop writers' rate before the restore: whether the service keeps that rate
// while it restores.

// restoreSet is what a series of restores measured: each restore's time, the writers' spans before and during it,
// and what the reads of the restored board answered.
type restoreSet struct {
	took           []time.Duration
	shares         []float64 // each run's writers during/before
	before, during []Sample
	sum            restoreResult
}

// restoreSteps fills the restore board through the ledger server, then measures its restores with closed-loop and
// with open-loop writers on other boards (rows of rt, and the checks), and the closed-loop writers beside a CPU
// burner (rows of bt); it returns the WAL bytes an event of the
// fill wrote.
func (e *env) restoreSteps(ctx context.Context, on *service, db *ledgerDB, rt, bt *table, sz sizes) (float64, error) {
	n := sz.LedgerEvents
	const board = "ledger-restore"
	var others []string
	for i := range ledgerWriterBoards {
		id := fmt.Sprintf("ledger-other-%d", i)
		if err := e.createBoardOn(ctx, on, id, 0); err != nil {
			return 0, err
		}
		others = append(others, id)
	}
	w0, err := db.walLSN(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	fillStart := time.Now()
	if err := e.loadViaAPI(ctx, on, board, n, 0); err != nil {
		return 0, err
	}
	fill := time.Since(fillStart)
	w1, err := db.walLSN(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	if err := e.verifyBoard(ctx, on, board, n); err != nil {
		return 0, err
	}
	walPerEvent := float64(w1-w0) / float64(n)

	m := &meter{}
	stop := e.startWriters(ctx, on, others, sz.LedgerWriters, m)
	closed, err := e.restoreRounds(ctx, on, db, board, n, m)
	if err == nil {
		err = e.burnRounds(ctx, on, db, m, bt)
	}
	stop()
	if err != nil {
		return walPerEvent, err
	}
	cb, cd := e.restoreRow(rt, fmt.Sprintf("%d closed-loop clients", sz.LedgerWriters), n, closed)
	limit := time.Duration(float64(ledgerRestoreMillion) * float64(n) / 1e6)
	tookMed := medianDur(closed.took)
	share := median(closed.shares)
	e.check(fmt.Sprintf("ledger: restore of a board of %d events", n),
		fmt.Sprintf("≤ %s (%s per 1,000,000), other boards' writers ≥ %.1f× their rate before",
			fmtDur(limit), fmtDur(ledgerRestoreMillion), ledgerOthersKeepShare),
		fmt.Sprintf("%s, writers %s (%s → %s writes/s)", fmtDur(tookMed), fmtTimes(share), fmtRate(cb.Rate),
			fmtRate(cd.Rate)),
		tookMed <= limit && share >= ledgerOthersKeepShare && closed.clean() && sumErrs(cb, cd).Errs == 0)

	offered := ledgerOthersKeepShare * cb.Rate
	m = &meter{}
	stop = e.startPacedWriters(ctx, on, others, offered, m)
	paced, err := e.restoreRounds(ctx, on, db, board, n, m)
	stop()
	if err != nil {
		return walPerEvent, err
	}
	_, pd := e.restoreRow(rt, fmt.Sprintf("open loop, %s/s offered (%.1f× the closed-loop clients' rate before)",
		fmtRate(offered), ledgerOthersKeepShare), n, paced)
	ofClosed := pd.Rate / cb.Rate
	// Requests still in flight at a span's ends are not counted in it: the rate kept within 1 %.
	const edge = 0.99
	e.check(fmt.Sprintf("ledger: restore of a board of %d events, other boards offered %.1f× the closed-loop rate",
		n, ledgerOthersKeepShare),
		fmt.Sprintf("≤ %s, the writers' rate during ≥ %.1f× the closed-loop clients' rate before (offered that, "+
			"kept within 1 %%), p99 ≤ %s", fmtDur(limit), ledgerOthersKeepShare, fmtDur(ledgerSubmitP99)),
		fmt.Sprintf("%s, writers %s of the closed-loop rate (%s → %s writes/s, offered %s), p99 %s",
			fmtDur(medianDur(paced.took)), fmtTimes(ofClosed), fmtRate(cb.Rate), fmtRate(pd.Rate),
			fmtRate(offered), fmtDur(pd.P99)),
		medianDur(paced.took) <= limit && pd.Rate >= edge*offered && pd.P99 <= ledgerSubmitP99 && paced.clean() &&
			pd.Errs == 0)

	rt.notes = append(rt.notes, fmt.Sprintf("The board: %d players, one event each, written through the ledger "+
		"server with submitScores of %d items from %d callers in %s (%s events/s). Then, %d time(s) with each kind "+
		"of writers on %d other boards of the ledger server: they write for %s (before), the board's keys are "+
		"deleted from Redis (UNLINK of every key its pattern matches, in one MULTI: the board lost at once, the "+
		"others untouched), and "+
		"the restore is timed from the first read after the loss (which starts it) until a read of the board's "+
		"size and top 10 answers %d players and the same top 10 as before the loss (reads every 50 ms; the "+
		"writers' rate during: the same span). Closed-loop clients send a submission when the last is answered; "+
		"the open-loop writers send at a fixed rate (%d goroutines take the submissions as they fall due; their "+
		"latency counts from when each fell due, and one that finds none free is an error: the writers fell "+
		"behind), the rate %.1f× the closed-loop clients' median rate before. Restore: median (range) of the "+
		"runs; writers: medians of the runs, during/before the median of per-run ratios. UNAVAILABLE answers: "+
		"reads that were told the board is being restored; NOT_FOUND / partial answers (must be 0 / 0: the "+
		"README's \"never NOT_FOUND, an empty or a partial list\"): reads that answered the board null (with no "+
		"error), or fewer players or another top 10 (a read asks the size, then the top 10, in requests of their "+
		"own). CPU: cores of the ledger server, redis-server, PostgreSQL (all its processes) and the load "+
		"generator, and in parentheses of the whole machine (others' processes too: /proc/stat), over the "+
		"writers' span before and over the restore.",
		n, leaderboard.MaxBulk, sz.LoadWorkers, fill.Round(100*time.Millisecond), fmtRate(float64(n)/fill.Seconds()),
		e.o.Runs, len(others), e.o.Duration, n, ledgerPacedWorkers, ledgerOthersKeepShare))
	return walPerEvent, nil
}

// clean reports whether no read of the restored board answered NOT_FOUND, a partial board or an error.
func (s restoreSet) clean() bool {
	return s.sum.notFound == 0 && s.sum.partial == 0 && s.sum.failed == 0
}

// restoreRow adds a row of rt for a series of restores with writers named who, and returns the writers' median
// spans before and during.
func (e *env) restoreRow(rt *table, who string, n int, s restoreSet) (before, during Sample) {
	took := slices.Clone(s.took)
	slices.Sort(took)
	tookMed := took[len(took)/2]
	tookText := fmtDur(tookMed)
	if len(took) > 1 {
		tookText += fmt.Sprintf(" (%s–%s)", fmtDur(took[0]), fmtDur(took[len(took)-1]))
	}
	b, d := medianSample(s.before), medianSample(s.during)
	errText := fmtErrs(sumErrs(b, d))
	if s.sum.failed > 0 {
		errText = fmt.Sprintf("%s; %d failed reads of the restored board (%s)", errText, s.sum.failed,
			truncate(s.sum.firstErr, 60))
	}
	rt.add(who, fmt.Sprint(n), tookText, fmtRate(float64(n)/tookMed.Seconds()),
		fmt.Sprintf("%s → %s", fmtRate(b.Rate), fmtRate(d.Rate)), fmtTimes(median(s.shares)),
		fmt.Sprintf("%s → %s", fmtDur(b.P99), fmtDur(d.P99)), fmtCoreSet(b.Extra), fmtCoreSet(d.Extra),
		fmt.Sprint(s.sum.unavailable), fmt.Sprintf("%d / %d", s.sum.notFound, s.sum.partial), errText)
	if s.sum.notFound > 0 {
		rt.notes = append(rt.notes, "NOT_FOUND: "+s.sum.firstWrong)
	}
	return b, d
}

// medianDur is the median of ds.
func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// restoreRounds runs Runs restores of board (n events) while the writers whose outcomes go to m write: each the
// writers' span before, the loss (the board's keys unlinked), and the restore, timed by waitWhole.
func (e *env) restoreRounds(ctx context.Context, on *service, db *ledgerDB, board string, n int, m *meter) (
	restoreSet, error) {
	var set restoreSet
	drop := leaderboard.New(e.rdb, leaderboard.Config{Prefix: prefixLedger}) // for the board's key pattern only
	time.Sleep(min(e.o.Duration/5, time.Second))                             // the writers' warm-up
	for r := 0; r < e.o.Runs; r++ {
		m.take()
		c0 := e.cpuSnap(on, db)
		s0 := e.commandStats(ctx)
		if err := sleepCtx(ctx, e.o.Duration); err != nil {
			return set, err
		}
		b := m.take()
		b.Extra = c0.cores(e.cpuSnap(on, db))
		e.logCommands("before", s0, e.commandStats(ctx))
		top, found, err := readWhole(ctx, on, board)
		if err != nil || !found {
			return set, fmt.Errorf("restore board before the loss: found %v, %v", found, err)
		}
		if top.size != n {
			return set, fmt.Errorf("restore board: %d players before the loss, want %d", top.size, n)
		}
		keys, err := e.scanKeys(ctx, drop.BoardKeys(board))
		if err == nil {
			err = e.unlink(ctx, keys)
		}
		if err != nil {
			return set, fmt.Errorf("deleting the restore board's keys: %w", err)
		}
		m.take() // the deletion is the loss, not the restore
		c0 = e.cpuSnap(on, db)
		s0 = e.commandStats(ctx)
		res, err := waitWhole(ctx, on, board, top, restoreTimeout(n))
		d := m.take()
		d.Extra = c0.cores(e.cpuSnap(on, db))
		e.logCommands("during", s0, e.commandStats(ctx))
		if err != nil {
			return set, err
		}
		e.logf("ledger restore %d: %d events in %s (%d keys deleted); other boards %s → %s writes/s (p99 %s → %s)",
			r+1, n, res.took.Round(time.Millisecond), len(keys), fmtRate(b.Rate), fmtRate(d.Rate), fmtDur(b.P99),
			fmtDur(d.P99))
		set.took = append(set.took, res.took)
		set.before, set.during = append(set.before, b), append(set.during, d)
		if b.Rate > 0 {
			set.shares = append(set.shares, d.Rate/b.Rate)
		}
		set.sum.add(res)
	}
	return set, nil
}

// boardView is what a read of a board answered: its size and its top 10.
type boardView struct {
	size int
	top  []struct {
		PlayerID string  `json:"playerId"`
		Score    float64 `json:"score"`
	}
}

// The restore's reads: the board's size, then its top 10, each in a request of its own (top's list is non-null,
// so an error of top's would null a leaderboard field asked beside it, and hide what that answered).
const (
	sizeQuery = `query($b: ID!) { leaderboard(id: $b) { size } }`
	topQuery  = `query($b: ID!) { top(board: $b, first: 10) { playerId score } }`
)

// readSize reads a board's size through sv's API; found is false when leaderboard(id) answered null.
func readSize(ctx context.Context, sv *service, board string) (size int, found bool, err error) {
	data, err := sv.call(ctx, "", sizeQuery, map[string]any{"b": board})
	if err != nil {
		return 0, false, err
	}
	var r struct {
		Data struct{ Leaderboard *struct{ Size int } }
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, false, err
	}
	if r.Data.Leaderboard == nil {
		return 0, false, nil
	}
	return r.Data.Leaderboard.Size, true, nil
}

// readTop reads a board's top 10 through sv's API.
func readTop(ctx context.Context, sv *service, board string) (boardView, error) {
	var v boardView
	data, err := sv.call(ctx, "", topQuery, map[string]any{"b": board})
	if err != nil {
		return v, err
	}
	var r struct {
		Data struct{ Top json.RawMessage }
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return v, err
	}
	return v, json.Unmarshal(r.Data.Top, &v.top)
}

// readWhole reads a board's size and top 10 through sv's API; found is false when the board answered null.
func readWhole(ctx context.Context, sv *service, board string) (v boardView, found bool, err error) {
	if v.size, found, err = readSize(ctx, sv, board); err != nil || !found {
		return v, found, err
	}
	t, err := readTop(ctx, sv, board)
	v.top = t.top
	return v, true, err
}

// restoreResult is what waitWhole saw.
type restoreResult struct {
	took        time.Duration
	unavailable int // reads answered UNAVAILABLE (the board is being restored)
	notFound    int // reads that answered the board null, without an error
	partial     int // reads that answered fewer players or another top 10
	failed      int // reads that failed otherwise
	firstErr    string
	firstWrong  string // what the first NOT_FOUND read was
}

// add adds o's counts to r (the first messages kept).
func (r *restoreResult) add(o restoreResult) {
	r.unavailable += o.unavailable
	r.notFound += o.notFound
	r.partial += o.partial
	r.failed += o.failed
	if r.firstErr == "" {
		r.firstErr = o.firstErr
	}
	if r.firstWrong == "" {
		r.firstWrong = o.firstWrong
	}
}

// waitWhole reads board through sv every 50 ms until it answers want's size and top 10, and returns how long
// that took from the first read (which starts the restore of a board Redis lost).
func waitWhole(ctx context.Context, sv *service, board string, want boardView, timeout time.Duration) (restoreResult, error) {
	var res restoreResult
	start := time.Now()
	for read := 1; ; read++ {
		v, found, err := readWhole(ctx, sv, board)
		switch {
		case err != nil && strings.Contains(err.Error(), "UNAVAILABLE"):
			res.unavailable++
		case err != nil:
			if res.failed++; res.failed == 1 {
				res.firstErr = err.Error()
			}
		case !found:
			if res.notFound++; res.notFound == 1 {
				res.firstWrong = fmt.Sprintf("read %d after the loss answered leaderboard(id: %q) null, without an "+
					"error (%s after the first read began)", read, board, fmtDur(time.Since(start)))
			}
		case v.size == want.size && slices.Equal(v.top, want.top):
			res.took = time.Since(start)
			return res, nil
		default:
			res.partial++
		}
		if time.Since(start) > timeout {
			return res, fmt.Errorf("board %q not whole again %s after its loss (%d UNAVAILABLE, %d NOT_FOUND, %d "+
				"partial, %d failed reads: %s)", board, timeout, res.unavailable, res.notFound, res.partial,
				res.failed, res.firstErr)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return res, err
		}
	}
}

// restoreTimeout bounds the wait for a restore of n events: ten times the target's time for n, at least two
// minutes.
func restoreTimeout(n int) time.Duration {
	return max(2*time.Minute, 10*time.Duration(float64(ledgerRestoreMillion)*float64(n)/1e6))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// unlink deletes keys, 1000 to an UNLINK, all in one MULTI: Redis loses them at once, as a restart does. A
// command at a time would let the server start the restore between two of them and then lose keys it wrote.
func (e *env) unlink(ctx context.Context, keys []string) error {
	_, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for from := 0; from < len(keys); from += 1000 {
			p.Unlink(ctx, keys[from:min(from+1000, len(keys))]...)
		}
		return nil
	})
	return err
}
