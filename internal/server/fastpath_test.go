package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFastPathMatchesGqlgen sends the same requests, in the same order, to a server with the fast path
// (graph/fastpath.go) and to one where gqlgen's generated code answers everything (Config.generatedOnly), over the
// same Redis with the same clock: each request twice in a row, since the fast path runs a document only after
// gqlgen has run it once. Every response must be the same bytes, status and Content-Type, and so must the
// operation counts in /metrics; most second runs must have taken the fast path. The requests are
// TestPreparedResultsMatchGqlgen's (every field, escaping, nulls, approximate ranks, every resolver error), then
// requests of known documents that the fast path must leave to gqlgen before anything runs (variables that do
// not coerce, missing or null, unknown input fields, a complexity over the limit, persisted-query extensions,
// another operation name, trailing data, duplicated keys) and other Accept headers.
func TestFastPathMatchesGqlgen(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, readKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("readKey=%v", readKey), func(t *testing.T) {
			fast, gen, reader := preparedPair(t, now, readKey, func(cfg *Config, tested bool) {
				cfg.generatedOnly = !tested
				cfg.MaxQueryComplexity = 400
			})
			if fast.App.fast == nil || gen.App.fast != nil {
				t.Fatal("the fast path is not on where it should be")
			}
			same := func(what string, a, b rawResponse) {
				t.Helper()
				if a.status != b.status || a.contentType != b.contentType || !bytes.Equal(a.body, b.body) {
					t.Fatalf("%s\n    fast %d %s %s\n  gqlgen %d %s %s", what, a.status, a.contentType, a.body,
						b.status, b.contentType, b.body)
				}
			}
			steps := preparedSteps(reader, now)
			before := fast.App.fast.Operations()
			for i, st := range steps {
				for run := range 2 {
					same(fmt.Sprintf("step %d, run %d: %s %v", i, run, st.query, st.vars),
						fast.raw(t, st.key, st.query, st.vars), gen.raw(t, st.key, st.query, st.vars))
				}
			}
			if n := fast.App.fast.Operations() - before; n < int64(len(steps))/2 {
				t.Fatalf("%d of %d second runs took the fast path", n, len(steps))
			}

			// Known documents with requests the fast path leaves to gqlgen.
			submit := `mutation($in: ScoreInput!) { submitScore(input: $in) { updated entry { rank score } } }`
			around := `query($b: ID!, $p: ID!, $r: Int) { aroundMe(board: $b, playerId: $p, radius: $r) { rank playerId } }`
			named := `query Mine($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { rank } }`
			good := map[string]any{"in": map[string]any{"board": "p", "playerId": "d1", "score": 3.0}}
			for _, s := range []*testServer{fast, gen} { // teach the fast path these documents
				s.raw(t, testSubmitKey, submit, good)
				s.raw(t, reader, around, map[string]any{"b": "p", "p": "p1", "r": 1})
				s.rawBody(t, reader, []byte(`{"query":`+quote(named)+`,"operationName":"Mine","variables":{"b":"p","p":"p1"}}`), "")
			}
			before = fast.App.fast.Operations()
			declined := []struct {
				key  string
				body string
			}{
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{"in":{"board":"p","playerId":"d2"}}}`},
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{"in":{"board":"p","playerId":null,"score":1}}}`},
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{"in":{"board":"p","playerId":"d2","score":1,"bonus":2}}}`},
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{"in":null}}`},
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{}}`},
				{testSubmitKey, `{"query":` + quote(submit) + `}`},
				{testSubmitKey, `{"query":` + quote(submit) + `,"variables":{"in":{"board":"p","playerId":"d2","score":1}},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"00"}}}`},
				{reader, `{"query":` + quote(around) + `,"variables":{"b":"p","p":"p1","r":500}}`}, // complexity > 400
				{reader, `{"query":` + quote(around) + `,"variables":{"b":"p","p":"p1","r":2.5}}`},
				{reader, `{"query":` + quote(named) + `,"operationName":"Other","variables":{"b":"p","p":"p1"}}`},
				{reader, `{"query":` + quote(named) + `,"variables":{"b":"p","p":"p1"}}`}, // no operation name
			}
			for i, d := range declined {
				same(fmt.Sprintf("declined %d: %s", i, d.body), fast.rawBody(t, d.key, []byte(d.body), ""),
					gen.rawBody(t, d.key, []byte(d.body), ""))
				if n := fast.App.fast.Operations() - before; n != 0 {
					t.Fatalf("the fast path ran a request it must leave to gqlgen: %s", d.body)
				}
			}
			// Taken, and the same bytes: trailing data and duplicated keys as gqlgen's decoder reads them, other
			// Accept headers, escapes in the query text's JSON.
			before = fast.App.fast.Operations()
			taken := []struct {
				body, accept string
			}{
				// A string where a Float belongs passes gqlparser's variable check and fails in the argument's
				// unmarshaler, as the operation runs: the fast path runs it the same way.
				{`{"query":` + quote(submit) + `,"variables":{"in":{"board":"p","playerId":"d2","score":"3"}}}`, ""},
				{`{"query":` + quote(around) + `,"variables":{"b":"p","p":"p1","r":2}} trailing`, ""},
				{`{"variables":{"b":"p","p":"p2","r":2},"query":` + quote(around) + `}`, "application/graphql-response+json"},
				{`{"query":` + quote(around) + `,"variables":{"b":"p","p":"p1","r":0},"variables":{"b":"p","p":"p3"}}`, "*/*"},
				{`{"query":` + strings.ReplaceAll(quote(around), "aroundMe", `aroundM\u0065`) + `,"variables":{"b":"p","p":"p1"}}`, "text/html, application/json"},
				{`{"query":` + quote(around) + `,"variables":{"b":"p","p":"p1","r":1}}`, "text/plain"},
			}
			for i, tk := range taken {
				key := reader
				if strings.Contains(tk.body, "submitScore") {
					key = testSubmitKey
				}
				same(fmt.Sprintf("taken %d: %s", i, tk.body), fast.rawBody(t, key, []byte(tk.body), tk.accept),
					gen.rawBody(t, key, []byte(tk.body), tk.accept))
			}
			if n := fast.App.fast.Operations() - before; n < int64(len(taken))-1 {
				t.Fatalf("the fast path ran %d of %d requests it could take", n, len(taken))
			}

			// The operation counts and their outcomes are the same.
			for _, outcome := range []string{`outcome="ok"`, `outcome="NOT_FOUND"`, `outcome="BAD_USER_INPUT"`,
				`outcome="RATE_LIMITED"`, `outcome="UNAUTHENTICATED"`, `outcome="FORBIDDEN"`} {
				for _, field := range []string{"submitScore", "submitScores", "rank", "aroundMe", "friends"} {
					a := metricSum(t, fast, "lb_graphql_operations_total", `field="`+field+`"`, outcome)
					b := metricSum(t, gen, "lb_graphql_operations_total", `field="`+field+`"`, outcome)
					if a != b {
						t.Errorf("lb_graphql_operations_total{field=%q,%s}: fast %v, gqlgen %v", field, outcome, a, b)
					}
				}
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rawBody POSTs a request body as it is, with an Accept header when accept is not empty.
func (s *testServer) rawBody(t testing.TB, key string, body []byte, accept string) rawResponse {
	t.Helper()
	req := s.request(key, body)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return rawDo(t, req)
}
