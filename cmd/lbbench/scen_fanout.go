package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Fan-out workload: fanoutPlayers players take turns; submission k gives its player the score fanoutBase+k, so
// every submission is a new best of the whole board (rank 1: it touches the top) and a subscriber that holds a
// row with score fanoutBase+k has seen every submission up to k.
const (
	fanoutPlayers = 50
	fanoutBase    = 1_000_000
	fanoutFirst   = 10
	// fanoutSubmitter is how many submitting clients the pacer hands due submissions to. Enough that the planned
	// rate never waits for a free client: with 32, a cluster step whose submissions took ~37 ms under the fan-out's
	// load could offer only ~850 of its planned 1,000 a second (32 / 37 ms), the rest queued in the load generator,
	// where neither the achieved rate nor the latencies are the server's (coordinated omission).
	fanoutSubmitter = 256
	convergeWait    = 10 * time.Second // after the last submission, how long subscribers get to converge
	sampleEvery     = 10               // latency is recorded for every 10th submission (per subscriber)

	fanoutBoards = 100 // the largest subscriber count is also measured spread over this many boards

	// Targets of the live-at-scale issue for the largest subscriber count.
	fanoutP99       = 250 * time.Millisecond // mutation -> subscriber
	fanoutAchieved  = 0.95                   // share of the planned submissions/s achieved
	fanoutSubmitP99 = 50 * time.Millisecond  // a submission's own p99 while the fan-out runs
)

// topSubscription asks for the rows a live screen draws; first must equal fanoutFirst.
const topSubscription = `subscription($b: ID!) { topUpdates(board: $b, first: 10) { version snapshot entries { playerId rank score } removed } }`

// runFanout (issue scenario 5, the live-updates issue's measurement): N websocket subscribers (graphql-transport-ws)
// to one board's top 10 on one server process while SubmitRate submitScore calls per second (over HTTP) each take
// rank 1. Measured per subscriber and submission: the time from the mutation's HTTP response to the subscriber
// holding a list that contains it (every 10th submission sampled); messages delivered; whether every subscriber's
// list rebuilt from snapshot + diffs converges to `top` after writes stop; server CPU and RSS from /proc.
func runFanout(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	sz := e.sizes()
	t := &table{title: fmt.Sprintf("5. Live fan-out: topUpdates(first:%d) subscribers, %d submitScore/s taking rank 1",
		fanoutFirst, sz.SubmitRate),
		head: []string{"subscribers", "submits/s", "latency p50", "latency p99", "newest p50", "newest p99",
			"seen/expected", "converged", "converged after", "msgs/s", "gaps+errors", "CPU server/redis/loadgen",
			"server RSS (idle → end)", "submit p99 (in the server)"}}
	t.notes = append(t.notes, "latency: a submission's HTTP response → a subscriber receives an update that reflects it "+
		"(every 10th submission, every subscriber). newest: the same for the newest submission each update carries. "+
		"seen/expected: (subscriber, submission) pairs observed / pairs expected. converged: subscribers whose list "+
		"rebuilt from snapshot + diffs equals Store.Top after the last write; after: time from the last response "+
		"until all of them did. CPU in cores over the submission phase. submit p99: as the submitters saw it; in the "+
		"server: the bucket of the server's lb_http_request_duration_seconds{route=\"graphql\"} that holds the p99 of "+
		"the phase's requests (from reading the request to the response written).")
	if e.baseline() {
		t.notes = append(t.notes, "With -baseline every subscriber step runs on the new server, then on the baseline "+
			"(rows marked base; its boards are made and read through its API); the churn, rank-watch and cluster steps "+
			"run on the new server only.")
	}
	ct, err := e.churnStep(ctx) // first: its baseline is a server holding nothing else
	if err != nil {
		return nil, err
	}
	it, err := e.idleStep(ctx) // next: its RSS is measured from a server that has not grown yet
	if err != nil {
		return nil, err
	}
	// One board per subscriber count, then the largest count spread over fanoutBoards boards.
	type step struct{ n, boards int }
	var steps []step
	for _, n := range sz.Subscribers {
		steps = append(steps, step{n, 1})
	}
	top := sz.Subscribers[len(sz.Subscribers)-1]
	spread := min(fanoutBoards, top)
	if e.o.Quick {
		spread = min(10, top) // a board must get 10 submissions a run for latency to be sampled
	}
	steps = append(steps, step{top, spread})
	results := map[step]Sample{}
	for _, st := range steps {
		for _, sv := range e.svcs {
			s, err := e.fanoutStep(ctx, sv, st.n, st.boards, sz.SubmitRate)
			if err != nil {
				return []*table{t}, err
			}
			label := fmt.Sprint(st.n)
			if st.boards > 1 {
				label = fmt.Sprintf("%d over %d boards", st.n, st.boards)
			}
			if sv == e.newSvc() {
				results[st] = s
			} else {
				label += " (" + sv.name + ")"
			}
			e.fanoutRow(t, label, st.n, s)
		}
	}
	cs, err := e.clusterFanoutStep(ctx, top, sz.SubmitRate)
	if err != nil {
		return []*table{t}, fmt.Errorf("cluster fan-out: %w", err)
	}
	{
		x := cs.Extra
		e.fanoutRow(t, fmt.Sprintf("%d over %.0f boards, %d-primary cluster, %d servers", top, x["boards"],
			clusterPrimaries, clusterServers), top, cs)
		t.notes = append(t.notes, fmt.Sprintf("The cluster row: %d redis-servers in cluster mode (no replicas), %d "+
			"server processes on it, the subscribers alternating between them, the boards with the same number on "+
			"each primary, submissions alternating between the servers; CPU and RSS summed over the servers and "+
			"over the Redis nodes.", clusterPrimaries, clusterServers))
		converged := int(x["converged"]) == top
		e.check(fmt.Sprintf("cluster fan-out, %d primaries, %d servers, %d subscribers, %d submissions/s",
			clusterPrimaries, clusterServers, top, sz.SubmitRate),
			fmt.Sprintf("p99 ≤ %s, ≥ %s submissions/s, all converge", fmtDur(fanoutP99),
				fmtRate(fanoutAchieved*float64(sz.SubmitRate))),
			fmt.Sprintf("p99 %s, %s/s, converged %v, gaps+errors %.0f", fmtDur(cs.P99), fmtRate(cs.Rate),
				converged, x["gaps"]+x["sub_errors"]),
			x["seen"] > 0 && cs.P99 <= fanoutP99 && cs.Rate >= fanoutAchieved*float64(sz.SubmitRate) && converged)
	}
	for _, st := range []step{{top, 1}, {top, spread}} {
		last := results[st]
		x := last.Extra
		converged := int(x["converged"]) == st.n
		noGaps := x["gaps"]+x["sub_errors"] == 0
		submitP99 := time.Duration(x["submit_p99"])
		name := fmt.Sprintf("fan-out, %d subscribers, %d submissions/s", st.n, sz.SubmitRate)
		if st.boards > 1 {
			name = fmt.Sprintf("fan-out, %d subscribers over %d boards, %d submissions/s", st.n, st.boards, sz.SubmitRate)
		}
		e.check(name,
			fmt.Sprintf("p99 ≤ %s, ≥ %s submissions/s, submit p99 ≤ %s, all converge, no gaps", fmtDur(fanoutP99),
				fmtRate(fanoutAchieved*float64(sz.SubmitRate)), fmtDur(fanoutSubmitP99)),
			fmt.Sprintf("p99 %s, %s/s, submit p99 %s, converged %v, gaps+errors %.0f", fmtDur(last.P99),
				fmtRate(last.Rate), fmtDur(submitP99), converged, x["gaps"]+x["sub_errors"]),
			x["seen"] > 0 && last.P99 <= fanoutP99 && last.Rate >= fanoutAchieved*float64(sz.SubmitRate) &&
				submitP99 <= fanoutSubmitP99 && converged && noGaps) // seen 0: no latency was sampled
	}
	rt, err := e.rankWatchStep(ctx)
	if err != nil {
		return []*table{t, ct}, err
	}
	return []*table{t, ct, rt, it}, nil
}

// fanoutStep connects n subscribers to sv, runs e.o.Runs submission phases and returns the medians.
func (e *env) fanoutStep(ctx context.Context, sv *service, n, boards, rate int) (Sample, error) {
	idle := sv.usage().RSS
	perBoard := int(math.Ceil(e.o.Duration.Seconds() * float64(rate) / float64(boards))) // submissions per board and run
	fs := make([]*fanout, boards)
	times, err := newRespTimes(e.dir, boards, perBoard*e.o.Runs+2)
	if err != nil {
		return Sample{}, err
	}
	defer func() {
		for _, f := range fs {
			if f != nil {
				f.close()
			}
		}
		times.remove()
	}()
	start := time.Now()
	for b := range fs {
		board := fmt.Sprintf("fanout-%d-%d-%d", n, boards, b)
		if err := e.seedFanoutBoard(ctx, sv, board); err != nil {
			return Sample{}, err
		}
		fs[b] = newFanout(board, times, b)
		// Subscribers split as evenly as they go: the first n % boards boards get one more.
		m := n / boards
		if b < n%boards {
			m++
		}
		if err := fs[b].connect(ctx, []string{"ws://" + sv.addr + "/graphql"}, m); err != nil {
			return Sample{}, err
		}
	}
	e.logf("fan-out: %d subscribers on %d board(s) connected in %s", n, boards, time.Since(start).Round(time.Millisecond))
	var runs []Sample
	for r := 0; r < e.o.Runs; r++ {
		s, err := e.fanoutRun(ctx, fs, int64(r*perBoard+1), int64((r+1)*perBoard), rate, e.standaloneTarget(sv))
		if err != nil {
			return Sample{}, err
		}
		s.Extra["rss_idle"] = float64(idle)
		runs = append(runs, s)
	}
	return medianSample(runs), nil
}

// fanoutRow adds a step's row to the fan-out table: n subscribers, s its sample.
func (e *env) fanoutRow(t *table, label string, n int, s Sample) {
	x := s.Extra
	idle := "-"
	if v, ok := x["rss_idle"]; ok {
		idle = fmtBytes(int64(v))
	}
	t.add(label, fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99),
		fmtDur(time.Duration(x["newest_p50"])), fmtDur(time.Duration(x["newest_p99"])),
		fmt.Sprintf("%.2f%%", 100*x["seen"]), fmt.Sprintf("%.0f/%d", x["converged"], n),
		fmtDur(time.Duration(x["converge_ns"])), fmtRate(x["msgs_per_s"]),
		fmt.Sprintf("%.0f", x["gaps"]+x["sub_errors"]),
		fmtCores(s.CPU)+" / "+fmtCores(x["redis_cpu"])+" / "+fmtCores(x["gen_cpu"]),
		idle+" → "+fmtBytes(s.RSS),
		fmtDur(time.Duration(x["submit_p99"]))+" ("+fmtBucket(time.Duration(x["server_submit_p99"]))+")")
}

// fanTarget is what a fan-out run submits to and measures: the servers (submissions take turns over them), what
// tells the final top lists, and the CPU and memory of the servers and of Redis.
type fanTarget struct {
	servers []*service
	top     func(ctx context.Context, board string) ([]row, error) // the board's top fanoutFirst
	redis   func() procUsage                                       // summed over Redis processes
}

// standaloneTarget is sv on the tool's Redis: the new server's lists are read through env.store, the baseline's
// through its own API (its key format may differ).
func (e *env) standaloneTarget(sv *service) fanTarget {
	top := func(ctx context.Context, board string) ([]row, error) { return storeTop(ctx, e.store, board) }
	if sv.viaAPI {
		top = sv.apiTop
	}
	return fanTarget{servers: []*service{sv}, top: top, redis: e.redisUsage}
}

// storeTop reads a board's top fanoutFirst through a Store.
func storeTop(ctx context.Context, st *leaderboard.Store, board string) ([]row, error) {
	top, err := st.Top(ctx, leaderboard.View{Board: board}, 0, fanoutFirst)
	if err != nil {
		return nil, err
	}
	want := make([]row, len(top.Entries))
	for i, en := range top.Entries {
		want[i] = row{id: en.PlayerID, rank: en.Rank, score: en.Score}
	}
	return want, nil
}

// apiTop reads a board's top fanoutFirst through sv's API.
func (sv *service) apiTop(ctx context.Context, board string) ([]row, error) {
	data, err := sv.call(ctx, "", `query($b: ID!, $n: Int!) { top(board: $b, first: $n) { playerId rank score } }`,
		map[string]any{"b": board, "n": fanoutFirst})
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			Top []struct {
				PlayerID string
				Rank     int64
				Score    float64
			}
		}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s server: top of %q: %w", sv.name, board, err)
	}
	out := make([]row, len(r.Data.Top))
	for i, t := range r.Data.Top {
		out[i] = row{id: t.PlayerID, rank: t.Rank, score: t.Score}
	}
	return out, nil
}

// seedFanoutBoard creates a fan-out board for sv with 100 seed players (through env.store for the new server,
// through its API for the baseline).
func (e *env) seedFanoutBoard(ctx context.Context, sv *service, board string) error {
	if err := e.createBoardOn(ctx, sv, board, 0); err != nil {
		return err
	}
	if sv.viaAPI {
		vars := []byte(`{"in":[`)
		for i := range 100 {
			if i > 0 {
				vars = append(vars, ',')
			}
			vars = scoreInput(vars, board, "seed-"+strconv.Itoa(i), float64(i+1))
		}
		vars = append(vars, "]}"...)
		h := newRawHTTP(sv.addr, "/graphql")
		defer h.closeAll()
		_, err := h.post(ctx, 0, submitKey, request(`mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`, vars))
		return err
	}
	seed := make([]leaderboard.Submission, 100)
	for i := range seed {
		seed[i] = leaderboard.Submission{Board: board, Player: "seed-" + strconv.Itoa(i), Score: float64(i + 1)}
	}
	_, err := e.store.SubmitMany(ctx, seed)
	return err
}

// usage sums the servers' CPU and memory.
func (t fanTarget) usage() procUsage {
	var u procUsage
	for _, sv := range t.servers {
		su := sv.usage()
		u.CPU, u.RSS, u.MaxRSS = u.CPU+su.CPU, u.RSS+su.RSS, u.MaxRSS+su.MaxRSS
	}
	return u
}

// fanoutRun submits submissions first..last to every board of fs (rate per second in all, the boards taking
// turns), then waits for the subscribers to converge; figures are over all boards' subscribers.
func (e *env) fanoutRun(ctx context.Context, fs []*fanout, first, last int64, rate int, tg fanTarget) (Sample, error) {
	var msgs0, gaps0, errs0 int64
	subs := 0
	for _, f := range fs {
		f.lat.reset()
		f.newest.reset()
		f.window.Store(&[2]int64{first, last})
		msgs0, gaps0, errs0 = msgs0+f.msgs.Load(), gaps0+f.gaps.Load(), errs0+f.errs.Load()
		subs += len(f.subs)
	}
	total := (last - first + 1) * int64(len(fs))
	if first == 1 && tg.servers[0] == e.newSvc() {
		if len(fs) == 1 {
			e.profileNext(fmt.Sprintf("fanout-%d", subs))
		} else {
			e.profileNext(fmt.Sprintf("fanout-%d-over-%d", subs, len(fs)))
		}
	}
	wait := e.startProfiles(ctx, time.Duration(float64(total)/float64(rate)*float64(time.Second)))
	u0, g0, r0, t0 := tg.usage(), selfUsage(), tg.redis(), time.Now()
	// The pacer stops at twice the planned time (plus slack) even when the server cannot keep up: the step is
	// bounded by time as well as by count.
	budget := 2*time.Duration(float64(total)/float64(rate)*float64(time.Second)) + 5*time.Second
	h0, herr0 := serverBuckets(ctx, tg.servers, "lb_http_request_duration_seconds", `route="graphql"`)
	submits, last, submitCPU, err := submitTo(ctx, fs, first, last, rate, budget, tg.servers, e.o.SubmitProcess)
	if err != nil {
		return Sample{}, err
	}
	h1, herr1 := serverBuckets(ctx, tg.servers, "lb_http_request_duration_seconds", `route="graphql"`)
	serverP99 := bucketQuantile(h0, h1, 0.99)
	if herr0 != nil || herr1 != nil {
		serverP99 = 0
	}
	u1, g1, r1, el := tg.usage(), selfUsage(), tg.redis(), time.Since(t0).Seconds()
	if submits.Errs > 0 {
		return Sample{}, fmt.Errorf("fan-out submissions failed: %s", fmtErrs(submits))
	}
	var (
		mu        sync.Mutex
		converged int
		after     time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want, err := tg.top(ctx, f.board)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			n, d := f.waitConverged(ctx, want, convergeWait)
			mu.Lock()
			converged += n
			after = max(after, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return Sample{}, firstErr
	}
	lat, newest := &histogram{}, &histogram{}
	var msgs, gaps, errs int64
	for _, f := range fs {
		lat.merge(&f.lat)
		newest.merge(&f.newest)
		msgs, gaps, errs = msgs+f.msgs.Load(), gaps+f.gaps.Load(), errs+f.errs.Load()
	}
	msgs, gaps, errs = msgs-msgs0, gaps-gaps0, errs-errs0
	sampled := (last/sampleEvery - (first-1)/sampleEvery) * int64(subs)
	s := Sample{Ops: submits.Ops, Rate: float64(submits.Ops) / el, P50: lat.quantile(0.5), P99: lat.quantile(0.99),
		P999: lat.quantile(0.999), CPU: (u1.CPU - u0.CPU).Seconds() / el, RSS: tg.usage().RSS,
		Extra: map[string]float64{
			"newest_p50":        float64(newest.quantile(0.5)),
			"newest_p99":        float64(newest.quantile(0.99)),
			"seen":              float64(lat.count()) / float64(max(sampled, 1)),
			"converged":         float64(converged),
			"converge_ns":       float64(after),
			"msgs_per_s":        float64(msgs) / time.Since(t0).Seconds(),
			"gaps":              float64(gaps),
			"sub_errors":        float64(errs),
			"submit_p99":        float64(submits.P99),
			"server_submit_p99": float64(serverP99),
			"gen_cpu":           (g1.CPU - g0.CPU + submitCPU).Seconds() / el,
			"redis_cpu":         (r1.CPU - r0.CPU).Seconds() / el,
		}}
	e.logf("fan-out run: %d subscribers on %d board(s), %d submissions in %.1fs, p99 %s, converged %d after %s",
		subs, len(fs), submits.Ops, el, fmtDur(s.P99), converged, fmtDur(after))
	wait()
	return s, nil
}

// fmtBucket shows a histogram bucket's upper bound ("≤ 25ms"), "> 10s" past the largest, "-" when unknown.
func fmtBucket(d time.Duration) string {
	switch {
	case d < 0:
		return "> 10s"
	case d == 0:
		return "-"
	}
	return "≤ " + fmtDur(d)
}

var (
	versionField = []byte(`"version":`)
	typeNext     = []byte(`"type":"next"`)
	typePing     = []byte(`"type":"ping"`)
)

const decodeCacheSize = 4096
