package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Fan-out workload: fanoutPlayers players take turns; submission k gives its player the score fanoutBase+k, so
// every submission is a new best of the whole board (rank 1: it touches the top) and a subscriber that holds a
// row with score fanoutBase+k has seen every submission up to k.
const (
	fanoutPlayers   = 50
	fanoutBase      = 1_000_000
	fanoutFirst     = 10
	fanoutSubmitter = 32               // concurrent submitting clients
	convergeWait    = 10 * time.Second // after the last submission, how long subscribers get to converge
	sampleEvery     = 10               // latency is recorded for every 10th submission (per subscriber)
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
			"server RSS (idle → end)", "submit p99"}}
	t.notes = append(t.notes, "latency: a submission's HTTP response → a subscriber receives an update that reflects it "+
		"(every 10th submission, every subscriber). newest: the same for the newest submission each update carries. "+
		"seen/expected: (subscriber, submission) pairs observed / pairs expected. converged: subscribers whose list "+
		"rebuilt from snapshot + diffs equals Store.Top after the last write; after: time from the last response "+
		"until all of them did. CPU in cores over the submission phase.")
	var worstP99 time.Duration
	allConverged := true
	for _, n := range sz.Subscribers {
		s, err := e.fanoutStep(ctx, n, sz.SubmitRate)
		if err != nil {
			return []*table{t}, err
		}
		x := s.Extra
		t.add(fmt.Sprint(n), fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99),
			fmtDur(time.Duration(x["newest_p50"])), fmtDur(time.Duration(x["newest_p99"])),
			fmt.Sprintf("%.2f%%", 100*x["seen"]), fmt.Sprintf("%.0f/%d", x["converged"], n),
			fmtDur(time.Duration(x["converge_ns"])), fmtRate(x["msgs_per_s"]),
			fmt.Sprintf("%.0f", x["gaps"]+x["sub_errors"]),
			fmtCores(s.CPU)+" / "+fmtCores(x["redis_cpu"])+" / "+fmtCores(x["gen_cpu"]),
			fmtBytes(int64(x["rss_idle"]))+" → "+fmtBytes(s.RSS), fmtDur(time.Duration(x["submit_p99"])))
		worstP99 = max(worstP99, s.P99)
		allConverged = allConverged && int(x["converged"]) == n && x["gaps"]+x["sub_errors"] == 0
	}
	e.check(fmt.Sprintf("fan-out, %d subscribers, %d submissions/s", sz.Subscribers[len(sz.Subscribers)-1], sz.SubmitRate),
		"p99 < 250 ms, every subscriber converges", fmt.Sprintf("p99 %s, all converged: %v", fmtDur(worstP99), allConverged),
		worstP99 < 250*time.Millisecond && allConverged)
	return []*table{t}, nil
}

// fanoutStep connects n subscribers, runs e.o.Runs submission phases and returns the medians.
func (e *env) fanoutStep(ctx context.Context, n, rate int) (Sample, error) {
	board := fmt.Sprintf("fanout-%d", n)
	if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: board}); err != nil {
		return Sample{}, err
	}
	seed := make([]leaderboard.Submission, 100)
	for i := range seed {
		seed[i] = leaderboard.Submission{Board: board, Player: "seed-" + strconv.Itoa(i), Score: float64(i + 1)}
	}
	if _, err := e.store.SubmitMany(ctx, seed); err != nil {
		return Sample{}, err
	}
	idle := e.serverUsage().RSS
	perRun := int(math.Ceil(e.o.Duration.Seconds() * float64(rate)))
	f := &fanout{board: board, resp: make([]atomic.Int64, perRun*e.o.Runs+2), decoded: newDecodeCache()}
	start := time.Now()
	if err := f.connect(ctx, "ws://"+e.serverAddr+"/graphql", n); err != nil {
		f.close()
		return Sample{}, err
	}
	e.logf("fan-out: %d subscribers connected in %s", n, time.Since(start).Round(time.Millisecond))
	defer f.close()
	var runs []Sample
	for r := 0; r < e.o.Runs; r++ {
		s, err := e.fanoutRun(ctx, f, int64(r*perRun+1), int64((r+1)*perRun), rate)
		if err != nil {
			return Sample{}, err
		}
		s.Extra["rss_idle"] = float64(idle)
		runs = append(runs, s)
	}
	return medianSample(runs), nil
}

// fanoutRun submits submissions first..last at rate per second, then waits for the subscribers to converge.
func (e *env) fanoutRun(ctx context.Context, f *fanout, first, last int64, rate int) (Sample, error) {
	f.lat.reset()
	f.newest.reset()
	f.window.Store(&[2]int64{first, last})
	msgs0, gaps0, errs0 := f.msgs.Load(), f.gaps.Load(), f.errs.Load()
	if first == 1 {
		e.profileNext(fmt.Sprintf("fanout-%d", len(f.subs)))
	}
	wait := e.startProfiles(ctx, time.Duration(float64(last-first+1)/float64(rate)*float64(time.Second)))
	u0, g0, r0, t0 := e.serverUsage(), selfUsage(), e.redisUsage(), time.Now()
	// The pacer stops at twice the planned time (plus slack) even when the server cannot keep up: the step is
	// bounded by time as well as by count.
	budget := 2*time.Duration(float64(last-first+1)/float64(rate)*float64(time.Second)) + 5*time.Second
	submits, last := f.submit(ctx, e, first, last, rate, budget)
	u1, g1, r1, el := e.serverUsage(), selfUsage(), e.redisUsage(), time.Since(t0).Seconds()
	if submits.Errs > 0 {
		return Sample{}, fmt.Errorf("fan-out submissions failed: %s", fmtErrs(submits))
	}
	top, err := e.store.Top(ctx, leaderboard.View{Board: f.board}, 0, fanoutFirst)
	if err != nil {
		return Sample{}, err
	}
	want := make([]row, len(top.Entries))
	for i, en := range top.Entries {
		want[i] = row{id: en.PlayerID, rank: en.Rank, score: en.Score}
	}
	converged, after := f.waitConverged(ctx, want, convergeWait)
	msgs := f.msgs.Load() - msgs0
	sampled := (last/sampleEvery - (first-1)/sampleEvery) * int64(len(f.subs))
	s := Sample{Ops: submits.Ops, Rate: float64(submits.Ops) / el, P50: f.lat.quantile(0.5), P99: f.lat.quantile(0.99),
		P999: f.lat.quantile(0.999), CPU: (u1.CPU - u0.CPU).Seconds() / el, RSS: e.serverUsage().RSS,
		Extra: map[string]float64{
			"newest_p50":  float64(f.newest.quantile(0.5)),
			"newest_p99":  float64(f.newest.quantile(0.99)),
			"seen":        float64(f.lat.count()) / float64(max(sampled, 1)),
			"converged":   float64(converged),
			"converge_ns": float64(after),
			"msgs_per_s":  float64(msgs) / time.Since(t0).Seconds(),
			"gaps":        float64(f.gaps.Load() - gaps0),
			"sub_errors":  float64(f.errs.Load() - errs0),
			"submit_p99":  float64(submits.P99),
			"gen_cpu":     (g1.CPU - g0.CPU).Seconds() / el,
			"redis_cpu":   (r1.CPU - r0.CPU).Seconds() / el,
		}}
	e.logf("fan-out run: %d subscribers, %d submissions in %.1fs, p99 %s, converged %d after %s", len(f.subs),
		submits.Ops, el, fmtDur(s.P99), converged, fmtDur(after))
	wait()
	return s, nil
}

// row is one entry of a subscriber's list.
type row struct {
	id    string
	rank  int64
	score float64
}

// update is a decoded topUpdates message without its version (shared by every subscriber that got the same
// content).
type update struct {
	snapshot bool
	entries  []row
	removed  []string
	maxSeq   int64 // the newest submission among the entries (0: none)
	err      string
}

// fanout is the subscriber side of the fan-out scenario.
type fanout struct {
	board   string
	subs    []*subscriber
	resp    []atomic.Int64 // submission k -> unix ns of its HTTP response
	window  atomic.Pointer[[2]int64]
	decoded *decodeCache
	lat     histogram // per (subscriber, sampled submission)
	newest  histogram // per message: the newest submission it carries
	msgs    atomic.Int64
	gaps    atomic.Int64 // version gaps
	errs    atomic.Int64 // error/complete messages, dropped connections, undecodable messages
}

type subscriber struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	list    []row
	version int64
	seen    int64 // newest submission seen
}

func (f *fanout) connect(ctx context.Context, url string, n int) error {
	f.subs = make([]*subscriber, n)
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 2048, WriteBufferSize: 512}
	sub := mustJSON(map[string]any{"type": "subscribe", "id": "1",
		"payload": map[string]any{"query": topSubscription, "variables": map[string]any{"b": f.board}}})
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := f.dial(ctx, d, url, sub)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("subscriber %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
				f.subs[i] = s
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return firstErr
	}
	// Every subscriber has its snapshot before the first submission.
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range f.subs {
		for {
			s.mu.Lock()
			v := s.version
			s.mu.Unlock()
			if v >= 1 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("a subscriber got no snapshot within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// dial opens one connection, completes connection_init/ack, subscribes and starts its reader.
func (f *fanout) dial(ctx context.Context, d websocket.Dialer, url string, sub []byte) (*subscriber, error) {
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_init"}`)); err != nil {
		ws.Close()
		return nil, err
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		if bytes.Contains(data, []byte(`"connection_ack"`)) {
			break
		}
		if !bytes.Contains(data, []byte(`"ping"`)) && !bytes.Contains(data, []byte(`"pong"`)) {
			ws.Close()
			return nil, fmt.Errorf("unexpected before connection_ack: %s", truncate(string(data), 200))
		}
	}
	ws.SetReadDeadline(time.Time{})
	if err := ws.WriteMessage(websocket.TextMessage, sub); err != nil {
		ws.Close()
		return nil, err
	}
	s := &subscriber{ws: ws}
	go f.read(s)
	return s, nil
}

var (
	versionField = []byte(`"version":`)
	typeNext     = []byte(`"type":"next"`)
	typePing     = []byte(`"type":"ping"`)
)

// read handles one subscriber's messages until its connection closes.
func (f *fanout) read(s *subscriber) {
	for {
		_, data, err := s.ws.ReadMessage()
		if err != nil {
			if !closedByUs(err) {
				f.errs.Add(1)
			}
			return
		}
		now := time.Now().UnixNano()
		switch {
		case bytes.Contains(data, typeNext):
		case bytes.Contains(data, typePing):
			_ = s.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`))
			continue
		default: // error, complete, or anything unexpected on a subscription that should run forever
			if !bytes.Contains(data, []byte(`"type":"pong"`)) {
				f.errs.Add(1)
			}
			continue
		}
		f.msgs.Add(1)
		version, u := f.decode(data)
		if u.err != "" {
			f.errs.Add(1)
			continue
		}
		s.mu.Lock()
		if version != s.version+1 {
			f.gaps.Add(1)
		}
		s.version = version
		s.list = apply(s.list, u)
		prev := s.seen
		if u.maxSeq > s.seen {
			s.seen = u.maxSeq
		}
		s.mu.Unlock()
		w := f.window.Load()
		if w == nil || u.maxSeq <= prev {
			continue
		}
		if u.maxSeq >= w[0] && u.maxSeq <= w[1] {
			if r := f.resp[u.maxSeq].Load(); r > 0 {
				f.newest.add(time.Duration(max(now-r, 0)))
			} else {
				f.newest.add(0)
			}
		}
		// Every sampled submission in (prev, maxSeq] became visible to this subscriber now.
		from := max(prev+1, w[0])
		from += (sampleEvery - from%sampleEvery) % sampleEvery
		for k := from; k <= min(u.maxSeq, w[1]); k += sampleEvery {
			r := f.resp[k].Load()
			if r == 0 {
				// The update arrived before the mutation's response: the submit script publishes before it
				// replies. Zero is the honest latency from the response.
				f.lat.add(0)
				continue
			}
			f.lat.add(time.Duration(max(now-r, 0)))
		}
	}
}

func closedByUs(err error) bool {
	return websocket.IsCloseError(err, websocket.CloseNormalClosure) || bytes.Contains([]byte(err.Error()),
		[]byte("use of closed network connection"))
}

// decode returns a message's version and its content, decoded once per distinct content: subscribers of one
// board get byte-identical messages except for the version, so the load generator parses each update once, not
// once per subscriber (it shares the two cores with the server it measures).
func (f *fanout) decode(data []byte) (int64, *update) {
	i := bytes.Index(data, versionField)
	if i < 0 {
		return 0, &update{err: "no version"}
	}
	j := i + len(versionField)
	k := j
	for k < len(data) && data[k] >= '0' && data[k] <= '9' {
		k++
	}
	version, err := strconv.ParseInt(string(data[j:k]), 10, 64)
	if err != nil {
		return 0, &update{err: "bad version"}
	}
	key := string(data[:j]) + string(data[k:])
	if u := f.decoded.get(key); u != nil {
		return version, u
	}
	var m struct {
		Payload struct {
			Data struct {
				TopUpdates struct {
					Snapshot bool
					Entries  []struct {
						PlayerID string
						Rank     int64
						Score    float64
					}
					Removed []string
				}
			}
			Errors []json.RawMessage
		}
	}
	u := &update{}
	if err := json.Unmarshal(data, &m); err != nil {
		u.err = err.Error()
	} else if len(m.Payload.Errors) > 0 {
		u.err = string(m.Payload.Errors[0])
	}
	tu := m.Payload.Data.TopUpdates
	u.snapshot, u.removed = tu.Snapshot, tu.Removed
	for _, en := range tu.Entries {
		u.entries = append(u.entries, row{id: en.PlayerID, rank: en.Rank, score: en.Score})
		if seq := int64(en.Score) - fanoutBase; seq > u.maxSeq {
			u.maxSeq = seq
		}
	}
	f.decoded.put(key, u)
	return version, u
}

// apply returns list after update u: a snapshot replaces it; a diff drops the removed ids and upserts the rows.
func apply(list []row, u *update) []row {
	if u.snapshot {
		return slices.Clone(u.entries)
	}
	list = slices.DeleteFunc(list, func(r row) bool {
		return slices.Contains(u.removed, r.id) || slices.ContainsFunc(u.entries, func(n row) bool { return n.id == r.id })
	})
	list = append(list, u.entries...)
	slices.SortFunc(list, func(a, b row) int { return int(a.rank - b.rank) })
	return list
}

// waitConverged waits until every subscriber's list equals want, at most d; it returns how many did and how
// long it took all of them (or d).
func (f *fanout) waitConverged(ctx context.Context, want []row, d time.Duration) (int, time.Duration) {
	start := time.Now()
	for {
		n := 0
		for _, s := range f.subs {
			s.mu.Lock()
			if slices.Equal(s.list, want) {
				n++
			}
			s.mu.Unlock()
		}
		if n == len(f.subs) || time.Since(start) >= d || ctx.Err() != nil {
			return n, time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// submit sends submissions first..last at rate per second from fanoutSubmitter clients (open loop: a pacer hands
// out due submissions; when every client is busy the pacer falls behind and the achieved rate shows it).
// It stops handing out submissions after budget and returns the last one handed out.
func (f *fanout) submit(ctx context.Context, e *env, first, last int64, rate int, budget time.Duration) (Sample, int64) {
	due := make(chan int64, 1024)
	var issued atomic.Int64
	issued.Store(first - 1)
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	go func() {
		defer close(due)
		start := time.Now()
		for k := first; k <= last; k++ {
			at := start.Add(time.Duration(float64(k-first) / float64(rate) * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-pctx.Done():
					return
				}
			}
			select {
			case due <- k:
				issued.Store(k)
			case <-pctx.Done():
				return
			}
		}
	}()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     int64
		firstErr string
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	for w := range fanoutSubmitter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range due {
				player := "f" + strconv.FormatInt(k%fanoutPlayers, 10)
				body := request(submitMutation, append(scoreInput([]byte(`{"in":`), f.board, player,
					float64(fanoutBase+k)), '}'))
				s := time.Now()
				_, err := e.hot.post(ctx, w, submitKey, body)
				end := time.Now()
				if err == nil {
					f.resp[k].Store(end.UnixNano())
				}
				mu.Lock()
				lat = append(lat, end.Sub(s))
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s := summarize(lat, time.Since(t0))
	s.Errs, s.FirstErr = errs, firstErr
	return s, issued.Load()
}

func (f *fanout) close() {
	var wg sync.WaitGroup
	for _, s := range f.subs {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			s.ws.Close()
		}()
	}
	wg.Wait()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeCache keeps decoded updates by content; it holds two generations and drops the older one when the newer
// fills up, so memory stays bounded however long the run.
type decodeCache struct {
	mu       sync.RWMutex
	cur, old map[string]*update
}

const decodeCacheSize = 4096

func newDecodeCache() *decodeCache {
	return &decodeCache{cur: map[string]*update{}, old: map[string]*update{}}
}

func (c *decodeCache) get(key string) *update {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if u := c.cur[key]; u != nil {
		return u
	}
	return c.old[key]
}

func (c *decodeCache) put(key string, u *update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= decodeCacheSize {
		c.old, c.cur = c.cur, map[string]*update{}
	}
	c.cur[key] = u
}

// histogram counts durations in 100 µs buckets up to 1 s and 10 ms buckets up to 100 s; safe for concurrent use.
type histogram struct {
	fine   [10_000]atomic.Int64 // [0, 1s) by 100µs
	coarse [9_900]atomic.Int64  // [1s, 100s) by 10ms; the last bucket also takes anything longer
	n      atomic.Int64
}

func (h *histogram) add(d time.Duration) {
	h.n.Add(1)
	if d < time.Second {
		h.fine[max(d, 0)/(100*time.Microsecond)].Add(1)
		return
	}
	h.coarse[min(int((d-time.Second)/(10*time.Millisecond)), len(h.coarse)-1)].Add(1)
}

func (h *histogram) count() int64 { return h.n.Load() }

func (h *histogram) reset() {
	for i := range h.fine {
		h.fine[i].Store(0)
	}
	for i := range h.coarse {
		h.coarse[i].Store(0)
	}
	h.n.Store(0)
}

// quantile returns the upper edge of the bucket holding the q-quantile (0 when empty).
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.fine {
		if seen += h.fine[i].Load(); seen >= rank {
			return time.Duration(i+1) * 100 * time.Microsecond
		}
	}
	for i := range h.coarse {
		if seen += h.coarse[i].Load(); seen >= rank {
			return time.Second + time.Duration(i+1)*10*time.Millisecond
		}
	}
	return 100 * time.Second
}
