package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQuickRun keeps the tool from rotting: it runs the -quick path of the two scenarios that need only Redis
// (the tool starts its own redis-server) and checks the tables it prints. It asserts what was measured, never
// how fast.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, options{Scenarios: []string{"memory", "6"}, Quick: true, Duration: 200 * time.Millisecond,
		Runs: 1, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"### 4. Memory per player", "### 6. Growth", "### Targets"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Memory rows: a board of 10000 players takes a plausible number of bytes per player.
	m := regexp.MustCompile(`\| 10000 +\| no exactTop +\| \d+ +\| [^|]+\| ([\d.]+) +\|`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no memory row for 10000 players:\n%s", text)
	}
	if per, _ := strconv.ParseFloat(m[1], 64); per < 20 || per > 2000 {
		t.Errorf("%.1f bytes per player: not a plausible measurement", per)
	}
	// Growth rows at both sizes, without errors.
	for _, n := range []string{"1000", "10000"} {
		row := regexp.MustCompile(`(?m)^\| ` + n + ` +\|.*\| 0 +\|$`)
		if !row.MatchString(text) {
			t.Errorf("no error-free growth row for %s players:\n%s", n, text)
		}
	}
}

// TestLedgerScenario runs the ledger scenario at tiny sizes (the tool builds the server and starts its own
// redis-server and PostgreSQL) and checks that it reports every figure: both sides of both steps with their
// ratio, the restore with the other boards' writers, the size, and the four targets. It asserts what was
// measured, never how fast.
func TestLedgerScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, options{Scenarios: []string{"ledger"}, Quick: true, Duration: 200 * time.Millisecond, Runs: 1,
		LedgerEvents: 2000, LedgerWriters: 2, Out: &out})
	text := out.String()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, text)
	}
	num := `[\d.]+k?`
	for _, step := range []string{`submitScore, 32 clients`, `submitScores, 1000 × 8`} {
		for _, side := range []string{"off", "on"} {
			// items/s, p50, p99, server CPU, the four CPU figures, the machine's cores, (on: the ledger's commits/s
			// and items a commit), no errors.
			re := `(?m)^\| ` + step + ` +\| ` + side + ` +\| ` + num + ` +\| ` + num + `[µm]?s +\| ` + num +
				`[µm]?s +\| [\d.]+ +\| \d+ / \d+ / \d+ / \d+ +\| [\d.]+ +\| `
			if side == "on" {
				re += `\d+ +\| [\d.]+ +\| 0 +\|$`
			} else {
				re += `- +\| - +\| 0 +\|$`
			}
			if !regexp.MustCompile(re).MatchString(text) {
				t.Errorf("no complete %s row of %q:\n%s", side, step, text)
			}
		}
		if !regexp.MustCompile(`(?m)^\| ` + step + ` +\| on/off +\| [\d.]+× +\|`).MatchString(text) {
			t.Errorf("no on/off row of %q:\n%s", step, text)
		}
	}
	// The restore, with closed-loop and with open-loop writers: its time and rate, the writers before and during
	// (the closed-loop ones without a failure; the open-loop ones may fall behind on a busy machine), the CPU of
	// the four processes before and during, the reads' answers counted.
	cores := `[\d.]+ / [\d.]+ / [\d.]+ / [\d.]+ \([\d.]+\)`
	restore := ` +\| 2000 +\| ` + num + `m?s +\| ` + num + ` +\| ` + num + ` → ` + num +
		` +\| [\d.]+× +\| ` + num + `m?s → ` + num + `m?s +\| ` + cores + ` +\| ` + cores +
		` +\| \d+ +\| \d+ / \d+ +\| `
	if !regexp.MustCompile(`(?m)^\| 2 closed-loop clients` + restore + `0 +\|$`).MatchString(text) {
		t.Errorf("no complete restore row with closed-loop writers:\n%s", text)
	}
	if !regexp.MustCompile(`(?m)^\| open loop, ` + num + `/s offered \(0\.8× the closed-loop clients' rate before\)` +
		restore + `[^|]+\|$`).MatchString(text) {
		t.Errorf("no complete restore row with open-loop writers:\n%s", text)
	}
	// The writers beside each burner: its cores asked and used, the writers before and during, their ratio and
	// the model's, their p99, the CPU before and during, no errors.
	for _, c := range burnCores {
		burn := `(?m)^\| ` + regexp.QuoteMeta(fmt.Sprintf("%.1f", c)) + ` +\| [\d.]+ +\| ` + num + ` → ` + num +
			` +\| [\d.]+× +\| [\d.]+× +\| ` + num + `[µm]?s → ` + num + `[µm]?s +\| ` + cores + ` +\| ` + cores +
			` +\| 0 +\|$`
		if !regexp.MustCompile(burn).MatchString(text) {
			t.Errorf("no complete row of the writers beside a burner of %.1f cores:\n%s", c, text)
		}
	}
	m := regexp.MustCompile(`(?m)^\| (\d+) +\| [^|]+ B/event\) +\| [^|]+ B/event\) +\| [^|]+\| (\d+) +\| (\d+) +\|$`).
		FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no size row:\n%s", text)
	}
	events, _ := strconv.Atoi(m[1])
	per, _ := strconv.Atoi(m[2])
	if events < 2000 || per < 20 || per > 5000 {
		t.Errorf("%d events at %d bytes each: not a plausible measurement", events, per)
	}
	for _, target := range []string{"ledger: submitScore, 32 clients", "ledger: submitScores, 1000 items × 8 callers",
		"ledger: restore of a board of 2000 events", "ledger: size in PostgreSQL",
		"ledger: restore of a board of 2000 events, other boards offered 0.8× the closed-loop rate"} {
		if !regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(target) + ` +\|`).MatchString(text) {
			t.Errorf("no target %q:\n%s", target, text)
		}
	}
}

func TestSelectScenarios(t *testing.T) {
	got, err := selectScenarios([]string{"5", "memory"})
	if err != nil || len(got) != 2 || got[0].name != "memory" || got[1].name != "fanout" {
		t.Errorf("selectScenarios(5, memory) = %v, %v; want memory then fanout", got, err)
	}
	if _, err := selectScenarios([]string{"nope"}); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestPercentileAndMedian(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 1000; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := summarize(lat, time.Second)
	if s.P50 != 500*time.Millisecond || s.P99 != 990*time.Millisecond || s.P999 != 999*time.Millisecond {
		t.Errorf("percentiles %v %v %v", s.P50, s.P99, s.P999)
	}
	if s.Rate != 1000 {
		t.Errorf("rate %v, want 1000", s.Rate)
	}
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("median = %v", m)
	}
	a := []Sample{{Rate: 10, Errs: 1, FirstErr: "x"}, {Rate: 30}, {Rate: 20}}
	b := []Sample{{Rate: 20}, {Rate: 30}, {Rate: 10}}
	if m := medianSample(a); m.Rate != 20 || m.Errs != 1 || m.FirstErr != "x" {
		t.Errorf("medianSample = %+v", m)
	}
	// Ratios are per run (10/20, 30/30, 20/10), then the median: 1, not 20/20 by accident of ordering.
	if r := medianRatio(a, b, func(s Sample) float64 { return s.Rate }); r != 1 {
		t.Errorf("medianRatio = %v, want 1", r)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 0; i < 99; i++ {
		h.add(time.Duration(i) * time.Millisecond) // 0..98 ms
	}
	h.add(3 * time.Second)
	if got := h.quantile(0.5); got < 49*time.Millisecond || got > 50*time.Millisecond {
		t.Errorf("p50 = %v, want about 49ms", got)
	}
	if got := h.quantile(1); got < 3*time.Second || got > 3*time.Second+10*time.Millisecond {
		t.Errorf("max = %v, want about 3s", got)
	}
	h.reset()
	if h.count() != 0 || h.quantile(0.5) != 0 {
		t.Error("reset left counts")
	}
}

// TestDecodeAndApply feeds a snapshot and a diff as the server sends them: the list is rebuilt, versions are
// read per message, and a second subscriber's identical content is decoded once.
func TestDecodeAndApply(t *testing.T) {
	f := &fanout{decoded: newDecodeCache()}
	snap := []byte(`{"id":"1","type":"next","payload":{"data":{"topUpdates":{"version":1,"snapshot":true,` +
		`"entries":[{"playerId":"a","rank":1,"score":1000003},{"playerId":"b","rank":2,"score":5}],"removed":[]}}}}`)
	diff := []byte(`{"id":"1","type":"next","payload":{"data":{"topUpdates":{"version":2,"snapshot":false,` +
		`"entries":[{"playerId":"c","rank":1,"score":1000009},{"playerId":"a","rank":2,"score":1000003}],"removed":["b"]}}}}`)
	v, u := f.decode(snap)
	if v != 1 || u.err != "" || !u.snapshot || u.maxSeq != 3 {
		t.Fatalf("snapshot: version %d, %+v", v, u)
	}
	list := apply(nil, u)
	v, u = f.decode(diff)
	if v != 2 || u.err != "" || u.maxSeq != 9 {
		t.Fatalf("diff: version %d, %+v", v, u)
	}
	list = apply(list, u)
	want := []row{{"c", 1, 1000009}, {"a", 2, 1000003}}
	if len(list) != 2 || list[0] != want[0] || list[1] != want[1] {
		t.Errorf("list %+v, want %+v", list, want)
	}
	other := bytes.Replace(diff, []byte(`"version":2`), []byte(`"version":17`), 1)
	if v, u2 := f.decode(other); v != 17 || u2 != u {
		t.Errorf("same content with another version: version %d, decoded again: %v", v, u2 != u)
	}
}

// TestRawHTTP checks the load steps' HTTP client against net/http's server: bodies with a length and chunked
// ones, GraphQL errors and HTTP errors reported, the key sent, and a fresh connection after the server closes one.
func TestRawHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "chunked":
			w.(http.Flusher).Flush() // forces chunked encoding
			io.WriteString(w, `{"data":{"x":1}}`)
		case "error":
			io.WriteString(w, `{"errors":[{"message":"bad","extensions":{"code":"BAD_USER_INPUT"}}],"data":null}`)
		case "status":
			http.Error(w, "nope", http.StatusForbidden)
		case "close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, `{"data":{}}`)
		default:
			io.WriteString(w, `{"data":{"auth":`+strconv.Quote(r.Header.Get("Authorization"))+`}}`)
		}
	}))
	defer srv.Close()
	h := newRawHTTP(strings.TrimPrefix(srv.URL, "http://"), "/graphql")
	ctx := context.Background()
	got, err := h.post(ctx, 0, "k1", []byte("plain"))
	if err != nil || string(got) != `{"data":{"auth":"Bearer k1"}}` {
		t.Fatalf("plain: %q, %v", got, err)
	}
	if got, err := h.post(ctx, 0, "", []byte("chunked")); err != nil || string(got) != `{"data":{"x":1}}` {
		t.Errorf("chunked: %q, %v", got, err)
	}
	if _, err := h.post(ctx, 0, "", []byte("error")); err == nil || !strings.Contains(err.Error(), "BAD_USER_INPUT") {
		t.Errorf("GraphQL error not reported: %v", err)
	}
	if _, err := h.post(ctx, 0, "", []byte("status")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("HTTP 403 not reported: %v", err)
	}
	if got, err := h.post(ctx, 1, "", []byte("close")); err != nil || string(got) != `{"data":{}}` {
		t.Errorf("close: %q, %v", got, err)
	}
	if _, err := h.post(ctx, 1, "", []byte("plain")); err != nil {
		t.Errorf("after a closed connection: %v", err)
	}
}

// TestBuildRevision builds the server at HEAD the way -baseline builds its revision: from git archive into a
// temporary directory, which must be gone afterwards (also when the revision is unknown or the build cancelled).
func TestBuildRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	root, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := gitRoot(ctx, root); err != nil {
		t.Skipf("needs a git checkout: %v", err)
	}
	parent := t.TempDir() // buildRevision's temporary source trees go here
	out := filepath.Join(t.TempDir(), "lbserver-head")
	empty := func(when string) {
		t.Helper()
		if ents, err := os.ReadDir(parent); err != nil || len(ents) > 0 {
			t.Errorf("%s: %s holds %v (%v), want nothing: the source tree was not removed", when, parent, ents, err)
		}
	}
	commit, err := buildRevision(ctx, root, "HEAD", parent, out)
	if err != nil {
		t.Fatalf("build HEAD: %v", err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil || commit != strings.TrimSpace(string(head)) {
		t.Errorf("commit %q, want HEAD %q (%v)", commit, head, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode()&0o111 == 0 || fi.Size() < 1<<20 {
		t.Errorf("no executable server at %s: %v %v", out, fi, err)
	}
	empty("after the build")

	if _, err := buildRevision(ctx, root, "no-such-revision-lbbench", parent, out+"-bad"); err == nil {
		t.Error("an unknown revision built")
	}
	if _, err := buildRevision(ctx, root, "--output=/tmp/x", parent, out+"-bad"); err == nil {
		t.Error("an option was taken for a revision")
	}
	// Cancelled part way (as by Ctrl-C): an error, and no tree left behind.
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	if _, err := buildRevision(cctx, root, "HEAD", parent, out+"-cancelled"); err == nil {
		t.Log("the build finished within 300 ms: cancellation not exercised")
	} else if cctx.Err() == nil {
		t.Errorf("build failed before its deadline: %v", err)
	}
	empty("after failed builds")
}

// TestCmpTable checks the -baseline rows of one step: new and base with their share of each raw side, the
// new/base ratios taken per round, and a raw side without runs left out.
func TestCmpTable(t *testing.T) {
	ct := newCmpTable("x", "clients", "req/s", "req", []string{"raw", "plain"})
	mk := func(rate float64, p99 time.Duration) Sample {
		return Sample{Rate: rate, P50: p99 / 2, P99: p99, CPU: rate / 10_000,
			Extra: map[string]float64{"redis_cpu": rate / 20_000, "gen_cpu": rate / 40_000}}
	}
	nw := []Sample{mk(2000, 10*time.Millisecond), mk(3000, 8*time.Millisecond)}
	base := []Sample{mk(1000, 20*time.Millisecond), mk(1500, 16*time.Millisecond)}
	raw := []Sample{mk(4000, time.Millisecond), mk(6000, time.Millisecond)}
	ct.add("32", nw, base, []side{{label: "raw: Store", short: "raw", runs: raw}, {label: "plain", short: "plain"}},
		func(s Sample) float64 { return s.Rate })
	var out bytes.Buffer
	ct.print(&out)
	text := out.String()
	if len(ct.rows) != 4 {
		t.Fatalf("%d rows, want new, base, new/base, raw:\n%s", len(ct.rows), text)
	}
	want := [][]string{
		{"32", "new", "2500", "50%", "-", "4.50ms", "9.00ms", "0.25", "100 / 50 / 25", "0"},
		{"32", "base", "1250", "25%", "-", "9.00ms", "18.0ms", "0.12", "100 / 50 / 25", "0"},
		{"32", "new/base", "2.00×", "", "", "0.50×", "0.50×", "2.00×", "1.00× / 1.00× / 1.00×", ""},
		{"32", "raw: Store", "5000", "", "", "500µs", "1.00ms", "-", "- / 50 / 25", "0"},
	}
	for i, w := range want {
		if strings.Join(ct.rows[i], "|") != strings.Join(w, "|") {
			t.Errorf("row %d:\n got %q\nwant %q", i, ct.rows[i], w)
		}
	}
}

// TestSpeedupTargets checks how a step is judged against the baseline: the median of the per-round ratios, and
// an error anywhere fails the target.
func TestSpeedupTargets(t *testing.T) {
	nw := []Sample{{Rate: 300}, {Rate: 200}, {Rate: 500}}
	base := []Sample{{Rate: 100}, {Rate: 100}, {Rate: 400}} // ratios 3, 2, 1.25
	e := &env{}
	e.checkSpeedup("fast enough", compareBase(nw, base, reqRate), 2.0)
	e.checkSpeedup("not fast enough", compareBase(nw, base, reqRate), 2.1)
	nw[1].Errs = 1
	e.checkSpeedup("errors", compareBase(nw, base, reqRate), 1.0)
	want := []bool{true, false, false}
	if len(e.targets) != 3 {
		t.Fatalf("targets %+v", e.targets)
	}
	for i, g := range e.targets {
		if g.met != want[i] || g.measured != "2.00×" {
			t.Errorf("%s: met %v measured %q, want %v and 2.00×", g.name, g.met, g.measured, want[i])
		}
	}
	// With the floor, its ratio over the base (median of the rounds') follows.
	v := compareBase(nw, base, reqRate)
	v.ceiling = medianRatio([]Sample{{Rate: 500}, {Rate: 400}, {Rate: 900}}, base, reqRate) // 5, 4, 2.25
	e.checkSpeedup("with the floor", v, 2.0)
	if g := e.targets[3]; g.measured != "2.00× (floor 4.00×)" {
		t.Errorf("with the floor: measured %q, want 2.00× (floor 4.00×)", g.measured)
	}
	if got := perOp(Sample{Rate: 5000}, 0.5); got != 100 {
		t.Errorf("0.5 cores at 5000/s: %.1f µs per operation, want 100", got)
	}
}

// TestRawHTTPAfterTheServerClosedIdle: a connection that has been idle longer than rawIdleReuse is not used again,
// so a request does not fail on a keep-alive connection that the server closed meanwhile (its IdleTimeout).
func TestRawHTTPAfterTheServerClosedIdle(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":{}}`)
	}))
	srv.Config.IdleTimeout = 100 * time.Millisecond
	srv.Start()
	defer srv.Close()
	defer func(d time.Duration) { rawIdleReuse = d }(rawIdleReuse)
	rawIdleReuse = 50 * time.Millisecond
	h := newRawHTTP(strings.TrimPrefix(srv.URL, "http://"), "/graphql")
	ctx := context.Background()
	for i := range 3 {
		if _, err := h.post(ctx, 0, "", []byte("{}")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		time.Sleep(300 * time.Millisecond) // the server closes the idle connection meanwhile
	}
}

// TestClusterTwiceInOneWorkdir starts the benchmark's Redis Cluster twice in the same work directory, as two runs
// with one -workdir do: the second start found the first one's nodes.conf, and --cluster create refused the nodes.
func TestClusterTwiceInOneWorkdir(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli: %v (make test-deps installs it)", err) // no silent skip: the cluster step needs it
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	for run := 1; run <= 2; run++ {
		c, err := startCluster(ctx, dir)
		if err != nil {
			t.Fatalf("start %d: %v", run, err)
		}
		if err := c.rdb.Set(ctx, "k", run, 0).Err(); err != nil {
			t.Errorf("start %d: SET on the cluster: %v", run, err)
		}
		c.stop()
	}
}

// With -baseline, each side goes first in every other run; without it, the new server runs alone.
func TestRoundOrder(t *testing.T) {
	e := &env{svcs: []*service{{name: "new"}, {name: "base"}}}
	first := map[string]int{}
	for r := range 6 {
		order := e.roundOrder(r)
		if len(order) != 2 || order[0] == order[1] {
			t.Fatalf("run %d: order %v, want both servers once", r, order)
		}
		first[e.svcs[order[0]].name]++
		if want := r % 2; order[0] != want {
			t.Errorf("run %d starts with %s, want %s", r, e.svcs[order[0]].name, e.svcs[want].name)
		}
	}
	if first["new"] != 3 || first["base"] != 3 {
		t.Errorf("first in 6 runs: %v, want 3 each", first)
	}
	e.svcs = e.svcs[:1]
	for r := range 3 {
		if got := e.roundOrder(r); len(got) != 1 || got[0] != 0 {
			t.Errorf("run %d without a baseline: %v", r, got)
		}
	}
}

// TestShardsScenario runs the shards scenario at tiny sizes (the tool builds the server, starts a 3-primary
// Redis Cluster and a server on it) and checks that it reports every figure: the writes per primary with a row
// for each primary, both boards' Redis time per submission with their ratio, the three reads on both boards with
// theirs, the capacity model, and the targets. It asserts what was measured, never how fast.
func TestShardsScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and starts a Redis Cluster")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli: %v (make test-deps installs it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, options{Scenarios: []string{"shards"}, Quick: true, Duration: 200 * time.Millisecond, Runs: 1,
		ShardPlayers: 3000, Out: &out})
	text := out.String()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, text)
	}
	for _, want := range []string{"### 8. Sharded boards: writes per primary", "### 8b. Sharded boards",
		"### 8c. Sharded boards", "### 8d. Sharded boards: reads on a board of 3000 players", "### 8e. Sharded boards",
		"### 8f. Sharded boards: commands sent", "### 8g. Sharded boards: capacity model",
		"### 8h. Sharded boards: Redis's time per submission to a board of 3000 players, ranks asked and not",
		"### 8i. Sharded boards", "| 3 shards (3000 players), no rank asked ", "| unsharded (3000 players), ranks asked "} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// A row per primary: its shard (one each), its shares of the submissions and the script calls with their
	// rates, the script calls beyond the submissions, its shares of the script time and of the CPU.
	share := `[\d.]+ % \([^)]+\)`
	for i := 1; i <= clusterPrimaries; i++ {
		if !regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(i) + ` \(127\.0\.0\.1:\d+\) +\| \d +\| ` + share + ` +\| ` +
			share + ` +\| -?[\d.]+k?/s +\| ` + share + ` +\| ` + share + ` +\|`).MatchString(text) {
			t.Errorf("no row of primary %d:\n%s", i, text)
		}
	}
	// Both boards' submissions without errors, and the ratio row.
	for _, board := range []string{"3 shards", "unsharded"} {
		if !regexp.MustCompile(`(?m)^\| ` + board + ` +\| [\d.]+k? +\|.*\| 0 +\|$`).MatchString(text) {
			t.Errorf("no error-free submission row of %s:\n%s", board, text)
		}
	}
	if !regexp.MustCompile(`(?m)^\| sharded/unsharded +\| [\d.]+× +\|`).MatchString(text) {
		t.Errorf("no sharded/unsharded row of the submissions:\n%s", text)
	}
	// The sharded board again with as many clients a shard as the unsharded board has, on a fresh board and on
	// the big one (ranks asked and not), each with its ratio row and its target.
	if !regexp.MustCompile(`(?m)^\| 3 shards, 96 clients \(32 a shard\) +\| [\d.]+k? +\|.*\| 0 +\|$`).MatchString(text) {
		t.Errorf("no error-free submission row of the sharded board at 32 clients a shard:\n%s", text)
	}
	if n := len(regexp.MustCompile(`(?m)^\| 32 a shard/unsharded +\| [\d.]+× +\|`).FindAllString(text, -1)); n != 3 {
		t.Errorf("%d ratio rows at 32 clients a shard, want 3 (fresh board, ranks asked, no rank asked):\n%s", n, text)
	}
	for _, kind := range []string{"ranks asked", "no rank asked"} {
		if !strings.Contains(text, "| 3 shards (3000 players), "+kind+", 96 clients (32 a shard) ") {
			t.Errorf("no row of the big sharded board, %s, at 32 clients a shard:\n%s", kind, text)
		}
	}
	if n := strings.Count(text, "32 clients a shard (each primary loaded as the unsharded board's), sharded vs unsharded"); n != 3 {
		t.Errorf("%d targets at 32 clients a shard, want 3:\n%s", n, text)
	}
	for _, read := range []string{`rank`, `aroundMe\(radius:5\)`, `top\(first:10\)`} {
		for _, board := range []string{"3 shards", "unsharded"} {
			if !regexp.MustCompile(`(?m)^\| ` + read + ` +\| ` + board + ` +\| [\d.]+k? +\|.*\| 0 +\|$`).MatchString(text) {
				t.Errorf("no error-free %s row of %s:\n%s", board, read, text)
			}
		}
		if !regexp.MustCompile(`(?m)^\| ` + read + ` +\| sharded/unsharded +\|`).MatchString(text) {
			t.Errorf("no ratio row of %s:\n%s", read, text)
		}
	}
	if !regexp.MustCompile(`(?m)^\| 3 shards +\| 3 +\| [\d.]+ +\| [\d.]+k?/s +\| [\d.]+k?/s +\|`).MatchString(text) {
		t.Errorf("no capacity row of the sharded board:\n%s", text)
	}
	// The MONITOR probes: commands sent per operation on both boards.
	for _, op := range []string{"submitScore", `rank`, `aroundMe\(radius:5\)`, `top\(first:10\)`} {
		for _, board := range []string{"3 shards", "unsharded"} {
			if !regexp.MustCompile(`(?m)^\| ` + op + ` +\| ` + board + ` +\| [\d.]+ +\| [^|]+\| \d +\| [\d.]+ +\|$`).
				MatchString(text) {
				t.Errorf("no probe row of %s on %s:\n%s", op, board, text)
			}
		}
	}
	// The cross-check found the two boards answering alike.
	if !regexp.MustCompile(`(?m)^\| shards: a sharded board of 3000 players reads as the unsharded one +\| .* \| yes +\|$`).
		MatchString(text) {
		t.Errorf("the sharded board does not read as the unsharded one:\n%s", text)
	}
	for _, target := range []string{"shards: sharded board: each primary's share of its submit script calls",
		"shards: Redis CPU a submission", "shards: rank on 3000 players", "shards: top(first:10) on 3000 players"} {
		if !strings.Contains(text, "| "+target) {
			t.Errorf("no target %q:\n%s", target, text)
		}
	}
}
