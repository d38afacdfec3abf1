package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// readmeRow returns the cells of the README table row whose first cell is first (`NAME` or a code), in the
// table that follows heading; the test fails when there is none.
func readmeRow(t *testing.T, heading, first string, contains string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", heading)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "| "+first+" |") || !strings.Contains(line, contains) {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") { // no cell of these tables holds a |
			cells = append(cells, strings.TrimSpace(c))
		}
		return cells
	}
	t.Fatalf("README %q has no row %s mentioning %q", heading, first, contains)
	return nil
}

// readmeStatuses reads an errors-table HTTP cell: "422 / 400" is the status for JSON clients, then the one for
// application/graphql-response+json clients.
func readmeStatuses(t *testing.T, cell string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(cell, "/") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("README HTTP cell %q", cell)
		}
		out = append(out, n)
	}
	return out
}

// README ("Errors"): a document over the complexity, field or depth limit is refused before it runs like one
// that does not validate: 422 (400 to application/graphql-response+json), BAD_USER_INPUT with the limit in
// extensions.reason, on POST and GET, on the fast path's documents too, and on a websocket as a document that does
// not validate.
func TestLimitErrorStatuses(t *testing.T) {
	t.Parallel()
	row := readmeRow(t, "Errors", "`BAD_USER_INPUT`", "COMPLEXITY_LIMIT_EXCEEDED")
	want := readmeStatuses(t, row[1])
	if len(want) != 2 {
		t.Fatalf("README: %q", row[1])
	}
	for _, reason := range []string{graph.ReasonComplexity, graph.ReasonFields, graph.ReasonDepth} {
		if !strings.Contains(row[2], "`"+reason+"`") {
			t.Errorf("README's row %q does not name %s", row[2], reason)
		}
	}

	cfg := testConfig(t)
	cfg.MaxQueryComplexity = 300
	cfg.MaxQueryFields = 16 // s.submit selects 15
	cfg.MaxQueryDepth = 3
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "lim"})
	s.submit(t, map[string]any{"board": "lim", "playerId": "a", "score": 1})
	// rank on the fast path: gqlgen ran this document once, with variables within the limit.
	const ranked = `query($b: ID!, $n: Int!) { top(board: $b, first: $n) { rank score } }`
	if r := s.do(t, "", ranked, map[string]any{"b": "lim", "n": 2}); r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("within the limit: %+v", r)
	}
	cases := []struct {
		name, query, reason string
		vars                map[string]any
	}{
		{"complexity", `{ a: top(board: "lim", first: 200) { rank score } }`, graph.ReasonComplexity, nil},
		{"complexity, a known document's variables", ranked, graph.ReasonComplexity, map[string]any{"b": "lim", "n": 500}},
		{"fields", "{" + strings.Repeat(" __typename", 17) + " }", graph.ReasonFields, nil},
		{"depth", `{ __type(name: "Query") { fields { type { ofType { name } } } } }`, graph.ReasonDepth, nil},
	}
	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{"query": c.query, "variables": c.vars})
		for i, accept := range []string{"application/json", "application/graphql-response+json"} {
			req := s.request("", body)
			req.Header.Set("Accept", accept)
			r := doRequest(t, req)
			if r.Status != want[i] || len(r.Errors) != 1 || r.Errors[0].Code() != codeInvalid || reason(r) != c.reason {
				t.Errorf("%s, POST, Accept %s: status %d errors %+v; want %d %s", c.name, accept, r.Status, r.Errors,
					want[i], c.reason)
			}
		}
		q := url.Values{"query": {c.query}}
		if c.vars != nil {
			v, _ := json.Marshal(c.vars)
			q.Set("variables", string(v))
		}
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/graphql?"+q.Encode(), nil)
		if r := doRequest(t, req); r.Status != want[0] || reason(r) != c.reason {
			t.Errorf("%s, GET: status %d errors %+v; want %d %s", c.name, r.Status, r.Errors, want[0], c.reason)
		}
	}

	// On a websocket a document over a limit travels as one that does not validate does (the same message type),
	// coded the same way.
	ctx := ctxT(t, 20*time.Second)
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	first := func(id, query string, vars map[string]any) wstest.Message {
		t.Helper()
		if err := conn.Subscribe(id, query, vars); err != nil {
			t.Fatal(err)
		}
		m, err := conn.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for last := m; last.Type != "complete"; { // the server ends the operation
			if last, err = conn.Next(ctx); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		return m
	}
	invalid := first("invalid", `{ nosuchfield }`, nil)
	for i, c := range cases {
		id := strconv.Itoa(i)
		m := first(id, c.query, c.vars)
		if errs := m.Errors(); m.Type != invalid.Type || m.ID != id || len(errs) != 1 || errs[0].Code() != codeInvalid ||
			errs[0].Extensions["reason"] != c.reason {
			t.Errorf("%s, websocket: %s; want a %q message, BAD_USER_INPUT %s", c.name, m.Raw, invalid.Type, c.reason)
		}
	}
	// The limits stay what they were for documents within them.
	if r := s.do(t, "", ranked, map[string]any{"b": "lim", "n": 3}); r.Status != 200 || len(r.Errors) > 0 {
		t.Errorf("within the limit, after: %+v", r)
	}
}

// batchElement is one answer of a batch.
type batchElement struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

func (e batchElement) reason() string {
	if len(e.Errors) != 1 {
		return ""
	}
	r, _ := e.Errors[0].Extensions["reason"].(string)
	return r
}

// batchOf POSTs n copies of one request as a batch and returns the answers and the bytes of the whole answer.
func (s *testServer) batchOf(t *testing.T, key string, n int, query string, vars map[string]any) ([]batchElement, int) {
	t.Helper()
	one, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	ops := make([]string, n)
	for i := range ops {
		ops[i] = string(one)
	}
	status, body := s.rawPost(t, key, "["+strings.Join(ops, ",")+"]")
	var out []batchElement
	if err := json.Unmarshal([]byte(body), &out); status != http.StatusOK || err != nil || len(out) != n {
		t.Fatalf("batch of %d: %d %.300s (%v)", n, status, body, err)
	}
	return out, len(body)
}

// loneFits is the oracle of a batch's complexity and fields: the largest k (up to 20) for which one request of k
// aliased copies of sel is not refused for reason. Both limits add up over root fields, so a batch of copies of
// sel should run as many as one request may hold.
func (s *testServer) loneFits(t *testing.T, sel, reason string) int {
	t.Helper()
	for k := 1; k <= 20; k++ {
		r := s.do(t, testSubmitKey, aliases(k, sel), nil)
		if len(r.Errors) > 0 && r.Errors[0].Extensions["reason"] == reason {
			return k - 1
		}
		if r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("%d copies of %s: %d %+v", k, sel, r.Status, r.Errors)
		}
	}
	t.Fatalf("20 copies of %s fit", sel)
	return 0
}

// wantPrefix checks that the first n answers have data and every later one is refused for reason.
func wantPrefix(t *testing.T, what string, got []batchElement, n int, reason string) {
	t.Helper()
	if n < 1 || n >= len(got) {
		t.Fatalf("%s: the oracle lets %d of %d run; choose limits that cut the batch", what, n, len(got))
	}
	for i, e := range got {
		ok := len(e.Errors) == 0 && len(e.Data) > 4
		if (i < n) != ok || (i >= n && e.reason() != reason) {
			t.Errorf("%s: answer %d of %d: %.200s %+v; want the first %d with data, the others %s", what, i,
				len(got), e.Data, e.Errors, n, reason)
		}
	}
}

// seedBoard creates a board of n players p0..p{n-1} with scores 0..n-1.
func (s *testServer) seedBoard(t *testing.T, board string, n int) {
	t.Helper()
	s.create(t, map[string]any{"id": board})
	for i := 0; i < n; i += 10 { // 10 at a time: complexity 11, within a test's small limits
		var in []map[string]any
		for j := i; j < min(i+10, n); j++ {
			in = append(in, map[string]any{"board": board, "playerId": fmt.Sprintf("p%d", j), "score": j})
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": in}, nil)
	}
}

// A batch is bounded as one request is: its operations' complexity and fields together by MAX_QUERY_COMPLEXITY
// and MAX_QUERY_FIELDS (an operation over what the ones before it left is refused with that limit's reason), its
// answers' bytes together by MAX_RESPONSE_BYTES (RESPONSE_TOO_LARGE), on gqlgen's path, the top cache's and the
// fast path's alike. A refused mutation changes nothing; a mutation that ran is always answered.
func TestBatchBudget(t *testing.T) {
	t.Parallel()
	const n = 10 // operations per batch, MAX_BATCH's default
	server := func(t *testing.T, complexity, fields, bytes int) *testServer {
		cfg := testConfig(t)
		cfg.MaxQueryComplexity, cfg.MaxQueryFields, cfg.MaxResponseBytes = complexity, fields, bytes
		s := startServer(t, cfg)
		s.seedBoard(t, "bb", 60)
		return s
	}

	t.Run("complexity", func(t *testing.T) {
		t.Parallel()
		s := server(t, 1000, 0, 0)
		// Deeper than the live top (100) the top cache never answers: gqlgen's path.
		const sel = `top(board: "bb", first: 150) { rank score }`
		fits := s.loneFits(t, sel, graph.ReasonComplexity)
		hits := s.metric(t, topHits)
		got, _ := s.batchOf(t, "", n, aliases(1, sel), nil)
		wantPrefix(t, "gqlgen", got, fits, graph.ReasonComplexity)
		if d := s.metric(t, topHits) - hits; d != 0 {
			t.Errorf("%v answers came from the top cache", d)
		}
	})

	t.Run("fields", func(t *testing.T) {
		t.Parallel()
		s := server(t, 0, 40, 0)
		const sel = `leaderboard(id: "bb") { id title order mode windows timezone }`
		got, _ := s.batchOf(t, "", n, aliases(1, sel), nil)
		wantPrefix(t, "fields", got, s.loneFits(t, sel, graph.ReasonFields), graph.ReasonFields)
	})

	t.Run("top cache", func(t *testing.T) {
		t.Parallel()
		s := server(t, 1000, 0, 0)
		const sel = `top(board: "bb", first: 50) { rank score playerId }`
		fits := s.loneFits(t, sel, graph.ReasonComplexity)
		q := "{ " + sel + " }"
		s.cachedRaw(t, "", q, nil)
		hits := s.metric(t, topHits)
		got, _ := s.batchOf(t, "", n, q, nil)
		wantPrefix(t, "top cache", got, fits, graph.ReasonComplexity)
		if d := s.metric(t, topHits) - hits; d != float64(fits) {
			t.Errorf("%v answers of the batch came from the top cache, want %d", d, fits)
		}
	})

	t.Run("fast path", func(t *testing.T) {
		t.Parallel()
		s := server(t, 40, 0, 0)
		if s.App.fast == nil {
			t.Skip("no fast path")
		}
		const sel = `rank(board: "bb", playerId: "p7") { playerId rank tieRank score }`
		fits := s.loneFits(t, sel, graph.ReasonComplexity)
		q := "{ " + sel + " }"
		for range 2 { // gqlgen runs it on the prepared path, the fast path knows it from then on
			s.must(t, "", q, nil, nil)
		}
		ops := s.App.fast.Operations()
		got, _ := s.batchOf(t, "", n, q, nil)
		wantPrefix(t, "fast path", got, fits, graph.ReasonComplexity)
		if d := s.App.fast.Operations() - ops; d != int64(fits) {
			t.Errorf("the fast path ran %d operations of the batch, want %d", d, fits)
		}
	})

	t.Run("answer bytes", func(t *testing.T) {
		t.Parallel()
		// The oracle: the bytes of one answer's data, as the client counts them, and integer division.
		probe := server(t, 0, 0, 0)
		q := `{ top(board: "bb", first: 150) { playerId rank score } }`
		alone := probe.raw(t, "", q, nil)
		size := len(alone.body) - len(`{"data":}`)
		if alone.status != http.StatusOK || !strings.HasPrefix(string(alone.body), `{"data":`) || size < 1000 {
			t.Fatalf("alone: %d %.200s", alone.status, alone.body)
		}
		bound := 3*size + size/2
		s := server(t, 0, 0, bound)
		got, total := s.batchOf(t, "", n, q, nil)
		wantPrefix(t, "answer bytes", got, bound/size, graph.ReasonResponseSize)
		if total > bound+n*300 { // the withheld answers' errors are a few hundred bytes each
			t.Errorf("the batch answered %d bytes, bound %d", total, bound)
		}
		for _, e := range got[bound/size:] {
			if string(e.Data) != "null" || e.Errors[0].Code() != codeInvalid {
				t.Errorf("withheld: %s %+v", e.Data, e.Errors)
			}
		}

		// Mutations: one over the complexity left is refused and writes nothing; one whose answer passes the
		// bytes left is answered all the same (its write is done).
		submit := func(player string) string {
			return fmt.Sprintf(`mutation { submitScore(input: {board: "bb", playerId: "%s", score: 1000}) { updated entry { rank } } }`, player)
		}
		many := `{ top(board: "bb", first: 60) { playerId rank score } b: top(board: "bb", first: 60) { playerId rank score } c: top(board: "bb", first: 60) { playerId rank score } d: top(board: "bb", first: 60) { playerId rank score } }`
		body := func(q string) string { b, _ := json.Marshal(map[string]any{"query": q}); return string(b) }
		status, raw := s.rawPost(t, testSubmitKey, "["+body(many)+","+body(submit("late"))+"]")
		var els []batchElement
		if err := json.Unmarshal([]byte(raw), &els); status != 200 || err != nil || len(els) != 2 {
			t.Fatalf("%d %.300s", status, raw)
		}
		if els[0].reason() != graph.ReasonResponseSize || len(els[1].Errors) > 0 ||
			!strings.Contains(string(els[1].Data), `"updated":true`) {
			t.Errorf("a mutation after an answer that took the bytes: %s", raw)
		}
		strict := server(t, 300, 0, 0)
		big := aliases(5, `top(board: "bb", first: 59) { rank }`) // complexity 5 * (1 + 59) = 300 of 300: all of it
		status, raw = strict.rawPost(t, testSubmitKey, "["+body(big)+","+body(submit("refused"))+"]")
		els = nil
		if err := json.Unmarshal([]byte(raw), &els); status != 200 || err != nil || len(els) != 2 ||
			len(els[0].Errors) > 0 || els[1].reason() != graph.ReasonComplexity {
			t.Fatalf("a mutation over the complexity left: %d %.300s", status, raw)
		}
		ctx := ctxT(t, 5*time.Second)
		for st, want := range map[*testServer]string{s: "late", strict: "p59"} {
			p, err := st.Store.Top(ctx, leaderboard.View{Board: "bb"}, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Entries) == 0 || p.Entries[0].PlayerID != want {
				t.Errorf("the board's first after the batch: %+v, want %s", p.Entries, want)
			}
			if e, err := st.Store.Rank(ctx, leaderboard.View{Board: "bb"}, "refused"); err != nil || e != nil {
				t.Errorf("the refused mutation: %+v %v, want no score", e, err)
			}
		}
	})
}

// README ("Errors", "Configuration"): an answer of a query over MAX_RESPONSE_BYTES (its data and errors) is
// withheld: HTTP 200 (the operation ran), data null and one BAD_USER_INPUT error with reason RESPONSE_TOO_LARGE,
// on POST, GET, the fast path and websockets alike; an answer of exactly the bound is sent. A mutation's answer is
// never withheld: its writes are done.
func TestResponseBound(t *testing.T) {
	t.Parallel()
	row := readmeRow(t, "Errors", "`BAD_USER_INPUT`", graph.ReasonResponseSize)
	want := readmeStatuses(t, row[1])
	if len(want) != 1 {
		t.Fatalf("README: %q", row[1])
	}
	server := func(bound int) *testServer {
		cfg := testConfig(t)
		cfg.MaxResponseBytes = bound
		s := startServer(t, cfg)
		s.seedBoard(t, "rb", 60)
		return s
	}
	// The oracle: the bytes of each answer's data as the client counts them, from a server with the default bound.
	const top = `{ top(board: "rb", first: 60) { playerId rank score } }`
	ids := make([]string, 60)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
	}
	const friends = `query($f: [ID!]!) { friends(board: "rb", playerId: "p1", friendIds: $f) { playerId displayName rank tieRank approximate score topPercent updatedAt } }`
	fvars := map[string]any{"f": ids}
	probe := server(0)
	size := func(q string, vars map[string]any) int {
		r := probe.raw(t, "", q, vars)
		if r.status != http.StatusOK || !strings.HasPrefix(string(r.body), `{"data":`) || strings.Contains(string(r.body), `"errors"`) {
			t.Fatalf("%s: %d %.200s", q, r.status, r.body)
		}
		return len(r.body) - len(`{"data":}`)
	}
	topSize, friendsSize := size(top, nil), size(friends, fvars)
	if friendsSize <= topSize {
		t.Fatalf("friends answers %d bytes, top %d: want friends larger", friendsSize, topSize)
	}

	exact := server(topSize)
	if r := exact.raw(t, "", top, nil); r.status != http.StatusOK || len(r.body)-len(`{"data":}`) != topSize {
		t.Errorf("an answer of exactly MAX_RESPONSE_BYTES: %d %.200s", r.status, r.body)
	}

	s := server(topSize - 1)
	withheld := func(what string, r gqlResponse) {
		t.Helper()
		if r.Status != want[0] || string(r.Data) != "null" || len(r.Errors) != 1 || r.Errors[0].Code() != codeInvalid ||
			reason(r) != graph.ReasonResponseSize || !strings.Contains(r.Errors[0].Message, strconv.Itoa(topSize-1)) {
			t.Errorf("%s over MAX_RESPONSE_BYTES: status %d data %.100s errors %+v; want %d, null, %s", what, r.Status,
				r.Data, r.Errors, want[0], graph.ReasonResponseSize)
		}
	}
	withheld("POST", s.do(t, "", top, nil))
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/graphql?"+url.Values{"query": {top}}.Encode(), nil)
	withheld("GET", doRequest(t, req))
	if s.App.fast != nil {
		withheld("friends, gqlgen", s.do(t, "", friends, fvars)) // gqlgen runs it on the prepared path
		ops := s.App.fast.Operations()
		withheld("friends, fast path", s.do(t, "", friends, fvars))
		if s.App.fast.Operations() == ops {
			t.Error("the fast path did not take the second friends request")
		}
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := conn.Subscribe("q", top, nil); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Next(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := m.Result(); !m.IsData() || string(res.Data) != "null" || len(res.Errors) != 1 ||
		res.Errors[0].Extensions["reason"] != graph.ReasonResponseSize {
		t.Errorf("websocket: %s", m.Raw)
	}

	// A mutation's answer over the bound is sent, and its writes are done.
	in := make([]map[string]any, 30)
	for i := range in {
		in[i] = map[string]any{"board": "rb", "playerId": fmt.Sprintf("m%d", i), "score": 100 + i}
	}
	r := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated entry { `+entryFields+` } } }`,
		map[string]any{"in": in})
	if r.Status != http.StatusOK || len(r.Errors) > 0 || len(r.Data) <= topSize {
		t.Errorf("a mutation answering %d bytes over a bound of %d: %d %+v", len(r.Data), topSize-1, r.Status, r.Errors)
	}
	if e, err := s.Store.Rank(ctxT(t, 5*time.Second), leaderboard.View{Board: "rb"}, "m29"); err != nil || e == nil || e.Rank != 1 {
		t.Errorf("the mutation's write: %+v %v", e, err)
	}
}

// The batch of issue 43 at the default limits: ten requests of four aliased top(first: 1000) over players with
// 1 KiB of metadata answered 47 MB for 5 KB. Now one request's worth of it runs (two do not fit the complexity
// limit, as one request of eight aliases does not), and its answer, four pages over MAX_RESPONSE_BYTES, is
// withheld: the batch answers a few kilobytes of coded errors.
func TestBatchOfLargePages(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	def, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxQueryComplexity, cfg.MaxQueryFields, cfg.MaxResponseBytes, cfg.MaxBatch =
		def.MaxQueryComplexity, def.MaxQueryFields, def.MaxResponseBytes, def.MaxBatch
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "pages"})
	meta := map[string]any{"pad": strings.Repeat("m", 1000)}
	for chunk := range 5 {
		in := make([]map[string]any, 200)
		for i := range in {
			p := chunk*200 + i
			in[i] = map[string]any{"board": "pages", "playerId": fmt.Sprintf("player-%04d", p), "score": p,
				"displayName": fmt.Sprintf("Player %d", p), "metadata": meta}
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": in}, nil)
	}
	const sel = `top(board: "pages", first: 1000) { ` + entryFields + ` }`
	if r := s.do(t, "", aliases(8, sel), nil); reason(r) != graph.ReasonComplexity {
		t.Fatalf("eight aliases alone: %d %+v", r.Status, r.Errors)
	}
	// The oracle of the bytes: one page alone, as the client counts it; four of them pass the bound.
	page := s.raw(t, "", aliases(1, sel), nil)
	if page.status != http.StatusOK || 4*len(page.body) < cfg.MaxResponseBytes+4*100 {
		t.Fatalf("one page: %d, %d bytes; four must pass MAX_RESPONSE_BYTES", page.status, len(page.body))
	}
	if n := len(page.body); n < 1.1e6 || n > 1.3e6 { // README, MAX_RESPONSE_BYTES
		t.Errorf("a full page with 1 KiB of metadata a row answers %d bytes; the README says about 1.2 MB", n)
	}
	got, total := s.batchOf(t, "", cfg.MaxBatch, aliases(4, sel), nil)
	for i, e := range got {
		want := graph.ReasonComplexity
		if i == 0 {
			want = graph.ReasonResponseSize
		}
		if e.reason() != want {
			t.Errorf("answer %d: %.100s %+v, want %s", i, e.Data, e.Errors, want)
		}
	}
	if total > 8<<10 {
		t.Errorf("the batch answered %d bytes", total)
	}
}

// README ("Configuration"): the defaults of the settings of the request limits and the client address are the
// ones LoadConfig gives.
func TestLimitSettingsDocumented(t *testing.T) {
	def, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"MAX_RESPONSE_BYTES":   strconv.Itoa(def.MaxResponseBytes),
		"MAX_BATCH":            strconv.Itoa(def.MaxBatch),
		"MAX_QUERY_COMPLEXITY": strconv.Itoa(def.MaxQueryComplexity),
		"MAX_QUERY_FIELDS":     strconv.Itoa(def.MaxQueryFields),
		"MAX_QUERY_DEPTH":      strconv.Itoa(def.MaxQueryDepth),
		"MAX_CONNS_PER_ADDR":   strconv.Itoa(def.MaxConnsPerAddr),
		"CLIENT_ADDR_HEADER":   def.ClientAddrHeader,
		"IPV6_PREFIX":          strconv.Itoa(def.IPv6Prefix),
	} {
		row := readmeRow(t, "Configuration", "`"+name+"`", "")
		if row[2] != "`"+value+"`" {
			t.Errorf("README: %s defaults to %s; LoadConfig: %s", name, row[2], value)
		}
	}
	if row := readmeRow(t, "Configuration", "`TRUSTED_PROXIES`", ""); row[2] != "(none)" || len(def.TrustedProxies) > 0 {
		t.Errorf("README: TRUSTED_PROXIES defaults to %s; LoadConfig: %v", row[2], def.TrustedProxies)
	}
}
