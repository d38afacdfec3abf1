package server

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// bulkLoad fills a board with n players through the store directly (pipelined SubmitMany calls of MaxBulk, a few
// at once): player i scores i % 5000 (ties), every third has a display name, every fifth metadata.
func bulkLoad(t testing.TB, st *leaderboard.Store, board string, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	errs := make(chan error, 1)
	for start := 0; start < n; start += leaderboard.MaxBulk {
		subs := make([]leaderboard.Submission, 0, leaderboard.MaxBulk)
		for i := start; i < min(start+leaderboard.MaxBulk, n); i++ {
			sub := leaderboard.Submission{Board: board, Player: fmt.Sprintf("player-%07d", i), Score: float64(i % 5000)}
			if i%3 == 0 {
				name := fmt.Sprintf(`Name "%d", the ,quoted`, i)
				sub.DisplayName = &name
			}
			if i%5 == 0 {
				sub.Metadata = json.RawMessage(fmt.Sprintf(`{"level":%d,"tag":"a\"b"}`, i%7))
			}
			subs = append(subs, sub)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outs, err := st.SubmitMany(ctx, subs)
			if err == nil {
				for _, o := range outs {
					if o.Err != nil {
						err = o.Err
						break
					}
				}
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// exportGet GETs /export/<board> with query parameters and a key ("": none).
func (s *testServer) exportGet(t testing.TB, key, board string, params map[string]string) *http.Response {
	t.Helper()
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/export/"+url.PathEscape(board)+"?"+q.Encode(), nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// gqlTopPages pages `top` through GraphQL (1000 at a time) and returns every row as its raw JSON fields.
func gqlTopPages(t testing.TB, s *testServer, board string, vars map[string]any) []map[string]json.RawMessage {
	t.Helper()
	var all []map[string]json.RawMessage
	for offset := 0; ; offset += 1000 {
		v := map[string]any{"b": board, "o": offset}
		for k, x := range vars {
			v[k] = x
		}
		var out struct{ Top []map[string]json.RawMessage }
		s.must(t, "", `query($b: ID!, $o: Int, $w: Window, $p: String) { top(board: $b, first: 1000, offset: $o,
			window: $w, period: $p) { `+entryFields+` } }`, v, &out)
		all = append(all, out.Top...)
		if len(out.Top) < 1000 {
			return all
		}
	}
}

// TestExportMatchesTop: a 20,000-player board exported as NDJSON and as CSV gives exactly the rows that paging
// `top` through GraphQL gives, in rank order, every field byte for byte as GraphQL renders it (CSV: strings
// unquoted, null as an empty field, metadata as its JSON); a closed DAILY period is exported by window and period;
// CSV quoting survives commas and quotes in names.
func TestExportMatchesTop(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "big/board", "windows": []string{"ALL_TIME", "DAILY"}})
	const n = 20_000
	bulkLoad(t, s.Store, "big/board", n)
	want := gqlTopPages(t, s, "big/board", nil)
	if len(want) != n {
		t.Fatalf("top pages hold %d rows, want %d", len(want), n)
	}
	daily := map[string]any{"w": "DAILY", "p": s.Store.Now().UTC().Format("2006-01-02")}
	wantDaily := gqlTopPages(t, s, "big/board", daily)

	for _, tc := range []struct {
		params map[string]string
		want   []map[string]json.RawMessage
	}{
		{map[string]string{"format": "ndjson"}, want},
		{map[string]string{"format": "ndjson", "window": "DAILY", "period": daily["p"].(string)}, wantDaily},
	} {
		resp := s.exportGet(t, "", "big/board", tc.params)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("%v: status %d, content type %q", tc.params, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		i := 0
		for sc.Scan() {
			var row map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("line %d: %v: %s", i+1, err, sc.Bytes())
			}
			if i >= len(tc.want) {
				t.Fatalf("%v: more rows than top gives", tc.params)
			}
			if len(row) != len(tc.want[i]) {
				t.Fatalf("line %d has %d fields, GraphQL's entry %d: %s", i+1, len(row), len(tc.want[i]), sc.Bytes())
			}
			for f := range tc.want[i] {
				if string(row[f]) != string(tc.want[i][f]) {
					t.Fatalf("%v row %d field %s: export %s, top %s", tc.params, i+1, f, row[f], tc.want[i][f])
				}
			}
			i++
		}
		resp.Body.Close()
		if sc.Err() != nil || i != len(tc.want) {
			t.Fatalf("%v: %d rows, want %d (%v)", tc.params, i, len(tc.want), sc.Err())
		}
	}

	resp := s.exportGet(t, "", "big/board", nil) // CSV is the default
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("csv: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	records, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != n+1 || fmt.Sprint(records[0]) != fmt.Sprint(exportColumns) {
		t.Fatalf("csv: %d records, header %v", len(records), records[0])
	}
	// Every field of GraphQL's Entry, as the schema has it, is a column.
	var intro struct {
		Type struct{ Fields []struct{ Name string } } `json:"__type"`
	}
	s.must(t, "", `{ __type(name: "Entry") { fields { name } } }`, nil, &intro)
	var entry []string
	for _, f := range intro.Type.Fields {
		entry = append(entry, f.Name)
	}
	if fmt.Sprint(entry) != fmt.Sprint(exportColumns) {
		t.Fatalf("csv columns %v, the schema's Entry fields %v", exportColumns, entry)
	}
	quoted := 0
	for i, rec := range records[1:] {
		for j, f := range exportColumns {
			raw := want[i][f]
			var wantText string
			switch {
			case string(raw) == "null":
				wantText = ""
			case raw[0] == '"':
				if err := json.Unmarshal(raw, &wantText); err != nil {
					t.Fatal(err)
				}
			default:
				wantText = string(raw)
			}
			if rec[j] != wantText {
				t.Fatalf("csv row %d field %s: %q, top %s", i+1, f, rec[j], raw)
			}
		}
		if rec[1] != "" {
			quoted++
		}
	}
	if quoted == 0 {
		t.Fatal("no display name with commas and quotes was checked")
	}
}

// TestExportErrors: the statuses and codes of refused exports, each with a GraphQL-shaped JSON body; with a read
// key configured no key or an unknown key is 401 UNAUTHENTICATED, the read key and an admin key may export.
func TestExportErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "e", "windows": []string{"DAILY"}})
	s.submit(t, map[string]any{"board": "e", "playerId": "p", "score": 1})
	for _, tc := range []struct {
		key, board string
		params     map[string]string
		status     int
		code       string
	}{
		{"", "e", nil, 401, "UNAUTHENTICATED"},
		{"wrong", "e", nil, 401, "UNAUTHENTICATED"},
		{testReadKey, "nope", nil, 404, "NOT_FOUND"},
		{testReadKey, "e", map[string]string{"format": "xml"}, 400, "BAD_USER_INPUT"},
		{testReadKey, "e", map[string]string{"window": "HOURLY"}, 400, "BAD_USER_INPUT"},
		{testReadKey, "e", map[string]string{"window": "WEEKLY"}, 400, "BAD_USER_INPUT"}, // not a window of e
		{testReadKey, "e", map[string]string{"period": "2026-13-01"}, 400, "BAD_USER_INPUT"},
		{testReadKey, "e", map[string]string{"format": "ndjson"}, 200, ""},
		{testAdminKey, "e", map[string]string{"format": "ndjson"}, 200, ""},
	} {
		resp := s.exportGet(t, tc.key, tc.board, tc.params)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%+v: status %d: %s", tc, resp.StatusCode, body)
		}
		if tc.code == "" {
			var row map[string]any
			if err := json.Unmarshal(body, &row); err != nil || row["playerId"] != "p" {
				t.Fatalf("%+v: body %s", tc, body)
			}
			continue
		}
		var out gqlResponse
		if err := json.Unmarshal(body, &out); err != nil || len(out.Errors) != 1 || out.Errors[0].Code() != tc.code ||
			out.Errors[0].Message == "" {
			t.Fatalf("%+v: body %s", tc, body)
		}
	}
}

// keysMemory returns the keys that match pattern and the bytes MEMORY USAGE gives for them all (every element
// counted), split by keep(key).
func keysMemory(t testing.TB, s *testServer, pattern string, keep func(string) bool) (keys int, bytes int64) {
	t.Helper()
	ctx := context.Background()
	rdb := s.Store.Redis()
	var names []string
	iter := rdb.Scan(ctx, 0, pattern, 10_000).Iterator()
	for iter.Next(ctx) {
		if keep(iter.Val()) {
			names = append(names, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, k := range names {
		cmds[i] = pipe.MemoryUsage(ctx, k, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil && len(names) > 0 {
		t.Fatal(err)
	}
	for _, c := range cmds {
		bytes += c.Val()
	}
	return len(names), bytes
}

// TestExportMemoryFlat: exporting a large board (exportBigPlayers players, loaded directly through the store) as
// NDJSON, read slowly, keeps the server's heap growth far below the size of the data: the export holds one page
// at a time. The row count and the last rank are checked too. In Redis, the export's snapshot takes about the
// memory of the board's own keys, at most 2 % more (it copies the period's ranking, records and names), and is
// gone when the export is; how long its copy took (Redis's slow log) and the time to the first row are logged.
// Not under the race detector, which distorts the heap's figure (make test: 1,000,000 players); other export tests
// run the same path under it.
func TestExportMemoryFlat(t *testing.T) {
	redistest.WithoutRace(t)
	players := exportBigPlayers
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "huge"})
	start := time.Now()
	bulkLoad(t, s.Store, "huge", players)
	t.Logf("loaded %d players in %v", players, time.Since(start))

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start = time.Now()
	resp := s.exportGet(t, "", "huge", map[string]string{"format": "ndjson"})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReaderSize(resp.Body, 32<<10)
	var rows, total int
	var maxGrowth int64
	var last []byte
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			rows++
			total += len(line)
			last = line
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rows == 1 { // the copy is made: how long it held Redis, what it holds, against the board's own keys
			t.Logf("first row after %v", time.Since(start))
			slow, _ := s.Store.Redis().SlowLogGet(context.Background(), 128).Result()
			for _, e := range slow {
				if len(e.Args) > 1 && strings.HasSuffix(e.Args[1], "_snapshot") && e.Time.After(start.Add(-time.Second)) {
					t.Logf("the copy of %d players held Redis for %v", players, e.Duration)
				}
			}
			snapKeys, snapBytes := keysMemory(t, s, s.Store.SnapshotKeys("huge"), func(string) bool { return true })
			ownKeys, ownBytes := keysMemory(t, s, s.Store.BoardKeys("huge"), func(k string) bool {
				return !strings.Contains(k, ":snap:")
			})
			t.Logf("the snapshot: %d keys, %d bytes (%.1f per player); the board's own keys: %d, %d bytes",
				snapKeys, snapBytes, float64(snapBytes)/float64(players), ownKeys, ownBytes)
			if snapKeys == 0 || snapBytes > ownBytes+ownBytes/50 {
				t.Fatalf("the snapshot holds %d keys, %d bytes; the board's own keys %d bytes (want at most 2 %% more)",
					snapKeys, snapBytes, ownBytes)
			}
		}
		if rows%(players/8) == 0 { // a slow reader: pause, and measure the server's heap meanwhile
			time.Sleep(200 * time.Millisecond)
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			maxGrowth = max(maxGrowth, int64(m.HeapAlloc)-int64(before.HeapAlloc))
		}
	}
	t.Logf("exported %d rows, %d bytes in %v; largest heap growth %d bytes", rows, total, time.Since(start), maxGrowth)
	waitSnapshots(t, s, "huge", 0)
	if rows != players {
		t.Fatalf("%d rows, want %d", rows, players)
	}
	var lastRow struct{ Rank int }
	if err := json.Unmarshal(last, &lastRow); err != nil || lastRow.Rank != players {
		t.Fatalf("last row %s: rank %d, want %d", last, lastRow.Rank, players)
	}
	if limit := int64(8 << 20); maxGrowth > limit || int64(total) < 6*limit {
		t.Fatalf("heap grew by %d bytes during an export of %d bytes; want under %d", maxGrowth, total, limit)
	}

	// Deleting the big board: how long it takes, and whether any step of it was in Redis's slow log (over 10 ms).
	start = time.Now()
	if ok, err := s.Store.DeleteBoard(context.Background(), "huge"); err != nil || !ok {
		t.Fatalf("DeleteBoard = %v, %v", ok, err)
	}
	slow, _ := s.Store.Redis().SlowLogGet(context.Background(), 128).Result()
	steps := 0
	for _, e := range slow {
		if e.Time.After(start) && len(e.Args) > 1 && (strings.HasSuffix(e.Args[1], "_purge") ||
			strings.HasSuffix(e.Args[1], "_delete")) {
			steps++
			t.Logf("slow deletion step: %v %v", e.Duration, e.Args[1])
		}
	}
	t.Logf("deleted the %d-player board in %v; %d steps in the slow log", players, time.Since(start), steps)
}

// TestExportCutOnFailure: when a page read fails in the middle of an export (the board is deleted while a slow
// client reads), the response is cut off (the client gets an unexpected EOF), never a shorter file that looks
// complete.
func TestExportCutOnFailure(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "cut"})
	const players = 100_000 // far more than the socket buffers hold, so the server is still reading pages
	bulkLoad(t, s.Store, "cut", players)
	resp := s.exportGet(t, "", "cut", map[string]string{"format": "ndjson"})
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Store.DeleteBoard(context.Background(), "cut"); err != nil || !ok {
		t.Fatalf("DeleteBoard = %v, %v", ok, err)
	}
	rows := 1
	var err error
	for {
		if _, err = r.ReadBytes('\n'); err != nil {
			break
		}
		rows++
	}
	if err == io.EOF || rows >= players {
		t.Fatalf("the export ended cleanly after %d of %d rows (%v); want it cut off", rows, players, err)
	}
	t.Logf("cut off after %d rows: %v", rows, err)
}
