package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/wstest"
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
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
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
