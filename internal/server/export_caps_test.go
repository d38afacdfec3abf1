package server

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestExportCSVInjection: in CSV, a text cell (playerId, displayName, metadata) that starts with = + - @, a tab or
// a carriage return is written quoted with a single quote before it (OWASP's advice against CSV injection), so a
// spreadsheet shows it as text; every other text cell is quoted and unchanged; numbers stay bare numbers (a
// negative score too). NDJSON keeps the exact text. The expected cells are written out by hand, and the file is
// read back with encoding/csv.
func TestExportCSVInjection(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "csv", "mode": "LATEST"})
	for i, c := range []struct{ id, name string }{
		{"p1", `=HYPERLINK("http://x.test","win")`},
		{"p2", "+SUM(1,2)"},
		{"p3", "-2+3"},
		{"p4", "@cmd"},
		{"p5", "\tTAB"},
		{"p6", "\rCR"},
		{"=cmd|' /C calc'!A0", "plain"},
		{"p8", `a,"b"`},
		{"p9", "x=1"},
	} {
		s.submit(t, map[string]any{"board": "csv", "playerId": c.id, "score": -1 - i, "displayName": c.name})
	}
	s.submit(t, map[string]any{"board": "csv", "playerId": "p10", "score": -100, "metadata": map[string]any{"k": "=1"}})

	resp := s.exportGet(t, "", "csv", nil)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	// Rank order: scores -1, -2, ... -9, -100. The first three fields of each line, then the score as written.
	want := []string{
		`"p1","'=HYPERLINK(""http://x.test"",""win"")",1,1,false,-1,`,
		`"p2","'+SUM(1,2)",2,2,false,-2,`,
		`"p3","'-2+3",3,3,false,-3,`,
		`"p4","'@cmd",4,4,false,-4,`,
		"\"p5\",\"'\tTAB\",5,5,false,-5,",
		"\"p6\",\"'\rCR\",6,6,false,-6,",
		`"'=cmd|' /C calc'!A0","plain",7,7,false,-7,`,
		`"p8","a,""b""",8,8,false,-8,`,
		`"p9","x=1",9,9,false,-9,`,
		`"p10",,10,10,false,-100,`,
	}
	if len(lines) != len(want)+1 || lines[0] != strings.Join(exportColumns, ",") {
		t.Fatalf("csv:\n%s", raw)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i+1], w) {
			t.Errorf("line %d:\n%q\nwant it to start with\n%q", i+2, lines[i+1], w)
		}
	}
	if !strings.HasSuffix(lines[10], `,"{""k"":""=1""}"`) {
		t.Errorf("metadata cell: %q", lines[10])
	}
	records, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil || len(records) != 11 || records[1][1] != `'=HYPERLINK("http://x.test","win")` ||
		records[7][0] != "'=cmd|' /C calc'!A0" || records[10][5] != "-100" || records[10][1] != "" {
		t.Fatalf("read back: %q, %v", records, err)
	}

	resp = s.exportGet(t, "", "csv", map[string]string{"format": "ndjson"})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var names []string
	for sc.Scan() {
		var row struct {
			PlayerID    string
			DisplayName *string
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if row.DisplayName != nil {
			names = append(names, row.PlayerID+" "+*row.DisplayName)
		}
	}
	if names[0] != `p1 =HYPERLINK("http://x.test","win")` || names[5] != "p6 \rCR" || names[6] != "=cmd|' /C calc'!A0 plain" {
		t.Fatalf("ndjson names %q", names)
	}
}

// loadWide fills a board with players p00000.. scoring their number, each with about 850 bytes of metadata, so
// that an export of 10,000 of them (about 8 MB of NDJSON) is far more than the sockets between server and client
// hold.
func loadWide(t *testing.T, s *testServer, board string, players int) {
	t.Helper()
	pad := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 800)))
	var subs []leaderboard.Submission
	for i := range players {
		subs = append(subs, leaderboard.Submission{Board: board, Player: fmt.Sprintf("p%05d", i), Score: float64(i),
			Metadata: pad})
		if len(subs) == leaderboard.MaxBulk || i == players-1 {
			outs, err := s.Store.SubmitMany(context.Background(), subs)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
			}
			subs = subs[:0]
		}
	}
}

// heldExport starts an export and reads only its headers: the export then blocks on its socket (the file is far
// larger than the socket buffers), holding its slot and its address's share until closed.
func heldExport(t *testing.T, s *testServer, board string) *http.Response {
	t.Helper()
	resp := s.exportGet(t, "", board, map[string]string{"format": "ndjson"})
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("export: status %d: %s", resp.StatusCode, body)
	}
	return resp
}

// wantRefused checks a refused export's status, code and Retry-After.
func wantRefused(t *testing.T, resp *http.Response, status int, code, retry string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out gqlResponse
	if resp.StatusCode != status || json.Unmarshal(body, &out) != nil || len(out.Errors) != 1 ||
		out.Errors[0].Code() != code || resp.Header.Get("Retry-After") != retry {
		t.Fatalf("status %d, Retry-After %q: %s; want %d %s, Retry-After %s", resp.StatusCode,
			resp.Header.Get("Retry-After"), body, status, code, retry)
	}
}

// snapshotIDs returns the ids of the export snapshots of a board in Redis (on every primary of a cluster).
func snapshotIDs(t *testing.T, s *testServer, board string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var err error
	if cc, ok := s.Store.Redis().(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			k, err := c.Keys(ctx, s.Store.SnapshotKeys(board)).Result()
			mu.Lock()
			keys = append(keys, k...)
			mu.Unlock()
			return err
		})
	} else {
		keys, err = s.Store.Redis().Keys(ctx, s.Store.SnapshotKeys(board)).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, k := range keys {
		_, rest, _ := strings.Cut(k, ":snap:")
		id, _, _ := strings.Cut(rest, ":")
		ids[id] = true
	}
	return ids
}

// waitSnapshots waits until the board has n export snapshots in Redis (a generous bound).
func waitSnapshots(t *testing.T, s *testServer, board string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(snapshotIDs(t, s, board)) != n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots of %s, want %d", len(snapshotIDs(t, s, board)), board, n)
		}
	}
}

// TestExportCaps: at most EXPORT_CONCURRENCY exports run at once (one more is 503 RATE_LIMITED with Retry-After,
// HEAD still answers), an export counts against MAX_CONNS_PER_ADDR as a websocket does (with two exports and a
// websocket from an address at 3, another export is 429 RATE_LIMITED with Retry-After, and so is another
// websocket), a client that aborts its export frees its slot and its snapshot's keys, and when every export is
// over no snapshot key and no goroutine is left. EXPORT_CONCURRENCY=0 refuses every export. A client that stops
// reading is cut off after WRITE_TIMEOUT.
func TestExportCaps(t *testing.T) {
	cfg := testConfig(t)
	cfg.ExportConcurrency, cfg.MaxConnsPerAddr = 2, 3
	s := startServer(t, cfg)
	// Copies take turns, spaced by their duration (TestExportCopyTurns): a clock that stands still makes that
	// spacing nothing here.
	still := time.Now()
	s.App.exports.now = func() time.Time { return still }
	s.create(t, map[string]any{"id": "wide"})
	const players = 10_000
	start := time.Now()
	loadWide(t, s, "wide", players)
	t.Logf("loaded in %v", time.Since(start))
	off := testConfig(t)
	off.ExportConcurrency = 0
	s0 := startServer(t, off)
	s0.create(t, map[string]any{"id": "none"})
	wantRefused(t, s0.exportGet(t, "", "none", nil), http.StatusServiceUnavailable, "RATE_LIMITED", "10")

	ctx := ctxT(t, 20*time.Second)
	ws, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close() // the server's websocket pings run from now on, for good
	<-ws.Done()
	http.DefaultClient.CloseIdleConnections()
	base := settle(0)

	a := heldExport(t, s, "wide")
	b := heldExport(t, s, "wide")
	waitSnapshots(t, s, "wide", 2)
	wantRefused(t, s.exportGet(t, "", "wide", nil), http.StatusServiceUnavailable, "RATE_LIMITED", "10")
	head, _ := http.NewRequest(http.MethodHead, s.URL+"/export/wide", nil)
	if resp, err := http.DefaultClient.Do(head); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD while the slots are taken: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	ws, _, err = wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, s.exportGet(t, "", "wide", nil), http.StatusTooManyRequests, "RATE_LIMITED", "10")
	if ws2, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, nil); err == nil {
		ws2.Close()
		t.Fatal("a fourth long-lived connection from the address (2 exports, 1 websocket) was accepted")
	}
	ws.Close()

	// The client of a goes away: its slot and its snapshot are freed, b goes on.
	before := snapshotIDs(t, s, "wide")
	a.Body.Close()
	waitSnapshots(t, s, "wide", 1)
	for id := range snapshotIDs(t, s, "wide") {
		if !before[id] {
			t.Fatalf("snapshot %s appeared", id)
		}
	}
	c := heldExport(t, s, "wide")
	for _, resp := range []*http.Response{b, c} {
		r := bufio.NewReader(resp.Body)
		rows := 0
		for {
			if _, err := r.ReadBytes('\n'); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			rows++
		}
		resp.Body.Close()
		if rows != players {
			t.Fatalf("%d rows, want %d", rows, players)
		}
	}
	waitSnapshots(t, s, "wide", 0)
	<-ws.Done()
	http.DefaultClient.CloseIdleConnections()
	n := settle(base)
	t.Logf("goroutines: %d before, %d after", base, n)
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the exports, %d before\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}

	// A client that stops reading is cut off once a page has waited WRITE_TIMEOUT for its socket: the export
	// ends (its snapshot goes), and the client finds the file cut, never complete-looking. (A server of its own
	// with a short WRITE_TIMEOUT, on the same keys.)
	slow := testConfig(t)
	slow.KeyPrefix, slow.WriteTimeout = cfg.KeyPrefix, time.Second
	s1 := startServer(t, slow)
	resp := heldExport(t, s1, "wide")
	defer resp.Body.Close()
	waitSnapshots(t, s1, "wide", 1)
	waitSnapshots(t, s1, "wide", 0) // the server gave up on the stalled client
	rows := 0
	r := bufio.NewReader(resp.Body)
	for {
		if _, err = r.ReadBytes('\n'); err != nil {
			break
		}
		rows++
	}
	if err == io.EOF || rows >= players {
		t.Fatalf("the stalled export ended cleanly after %d of %d rows (%v); want it cut off", rows, players, err)
	}
	t.Logf("the stalled export was cut off after %d rows: %v", rows, err)
}

// TestExportCopyTurns: copies take turns, and after a copy that took d the next starts no sooner than
// exportCopySpacing * d later: an export that would wait longer than exportCopyWait is 503 RATE_LIMITED with
// Retry-After the rest of that wait (in whole seconds, rounded up); a shorter wait is waited out.
func TestExportCopyTurns(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "turns"})
	s.submit(t, map[string]any{"board": "turns", "playerId": "p", "score": 1})
	e := s.App.exports
	var clock atomic.Int64 // the exports' clock, in unix ns
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e.now = func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	start, wait := e.beginCopy(context.Background())
	if wait != 0 {
		t.Fatalf("first copy: wait %v", wait)
	}
	if _, wait := e.beginCopy(ctxT(t, 100*time.Millisecond)); wait == 0 {
		t.Fatal("a second copy started while one runs")
	}
	advance(2 * time.Second) // the copy took 2 s: the next may start 18 s after it ended
	e.endCopy(start)
	advance(5 * time.Second)
	wantRefused(t, s.exportGet(t, "", "turns", nil), http.StatusServiceUnavailable, "RATE_LIMITED", "13")
	advance(12500 * time.Millisecond) // 0.5 s to go: waited out
	resp := s.exportGet(t, "", "turns", map[string]string{"format": "ndjson"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"playerId":"p"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

// TestExportConcurrencySetting: EXPORT_CONCURRENCY is 2 unless set; 0 is allowed (no exports), a negative or
// non-numeric value is refused.
func TestExportConcurrencySetting(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]int{"": 2, "5": 5, "0": 0, "-1": -1, "many": -1} {
		cfg, err := LoadConfig(nil, func(k string) string {
			if k == "EXPORT_CONCURRENCY" {
				return env
			}
			return ""
		})
		if want < 0 {
			if err == nil {
				t.Errorf("EXPORT_CONCURRENCY=%q: no error", env)
			}
			continue
		}
		if err != nil || cfg.ExportConcurrency != want {
			t.Errorf("EXPORT_CONCURRENCY=%q: %d, %v; want %d", env, cfg.ExportConcurrency, err, want)
		}
	}
}

// TestExportStores: on a Redis Cluster and on the embedded store (whose scripts run as EVAL in another Lua), an
// export gives exactly the rows that paging `top` through GraphQL gives, on a board copied whole and on an
// exactTop board whose tail records are left out of the copy; no snapshot key is left after.
func TestExportStores(t *testing.T) {
	for _, store := range []string{"cluster", "embedded"} {
		t.Run(store, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.RedisURL = ""
			if store == "cluster" {
				if v, _ := strconv.ParseBool(os.Getenv(redistest.NoClusterEnv)); v {
					t.Skipf("%s is set", redistest.NoClusterEnv)
				}
				cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
			}
			s := startServer(t, cfg)
			s.create(t, map[string]any{"id": "whole"})
			s.create(t, map[string]any{"id": "tail", "exactTop": 50})
			// Two pages, in calls of 100 (the embedded store's scripts are slow: a call of 1000 took over 3 s).
			for _, b := range []struct {
				id string
				n  int
			}{{"whole", 1200}, {"tail", 300}} {
				for start := 0; start < b.n; start += 100 {
					var subs []leaderboard.Submission
					for i := start; i < start+100; i++ {
						name := fmt.Sprintf("=name %d", i)
						subs = append(subs, leaderboard.Submission{Board: b.id, Player: fmt.Sprintf("p%04d", i),
							Score: float64(i % 300), DisplayName: &name})
					}
					if outs, err := s.Store.SubmitMany(context.Background(), subs); err != nil || outs[0].Err != nil {
						t.Fatal(err, outs)
					}
				}
			}
			for _, board := range []string{"whole", "tail"} {
				want := gqlTopPages(t, s, board, nil)
				resp := s.exportGet(t, "", board, map[string]string{"format": "ndjson"})
				sc := bufio.NewScanner(resp.Body)
				i := 0
				for sc.Scan() {
					var row map[string]json.RawMessage
					if err := json.Unmarshal(sc.Bytes(), &row); err != nil || i >= len(want) {
						t.Fatalf("%s line %d: %v", board, i+1, err)
					}
					for f := range want[i] {
						if string(row[f]) != string(want[i][f]) {
							t.Fatalf("%s row %d field %s: export %s, top %s", board, i+1, f, row[f], want[i][f])
						}
					}
					i++
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || sc.Err() != nil || i != len(want) {
					t.Fatalf("%s: status %d, %d rows of %d (%v)", board, resp.StatusCode, i, len(want), sc.Err())
				}
				waitSnapshots(t, s, board, 0)
			}
		})
	}
}
