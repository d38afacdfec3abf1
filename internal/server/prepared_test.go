package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/graph"
)

// TestPreparedResultsMatchGqlgen runs the same requests, in the same order, on a server whose hot operations take
// the prepared path (graph/prepared.go) and on one where gqlgen's generated marshalers write
// every result, over the same Redis with the same clock and their own key prefixes: every response must be the
// same bytes, with the same status and Content-Type. The requests cover every field of Entry and ScoreResult
// (aliases, __typename, any order), names and metadata that need escaping, approximate ranks, nulls (a missing
// player, no previous score), resolver errors (NOT_FOUND, BAD_USER_INPUT, RATE_LIMITED, UNAUTHENTICATED,
// FORBIDDEN), an argument the generated code refuses (metadata too large), with a read key required and not; then
// 16 goroutines read at once with documents new to the plan cache (under -race in make test).
func TestPreparedResultsMatchGqlgen(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, readKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("readKey=%v", readKey), func(t *testing.T) {
			prep, gen, reader := preparedPair(t, now, readKey, func(cfg *Config, tested bool) {
				cfg.generatedOnly = !tested
			})
			before := graph.PreparedOperations()
			steps := preparedSteps(reader, now)
			for i, st := range steps {
				a, b := prep.raw(t, st.key, st.query, st.vars), gen.raw(t, st.key, st.query, st.vars)
				if a.status != b.status || a.contentType != b.contentType || !bytes.Equal(a.body, b.body) {
					t.Fatalf("step %d: %s %v\nprepared %d %s %s\n  gqlgen %d %s %s", i, st.query, st.vars,
						a.status, a.contentType, a.body, b.status, b.contentType, b.body)
				}
				if st.want != "" && !strings.Contains(string(a.body), st.want) {
					t.Fatalf("step %d: %s\nwant %s in %s", i, st.query, st.want, a.body)
				}
			}
			// Concurrently, with documents new to the plan cache (an alias per goroutine): reads of the same
			// data give the same bytes on both servers.
			var wg sync.WaitGroup
			errs := make(chan string, 16)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 8 {
						p := fmt.Sprintf("p%d", (g+i)%7)
						q := fmt.Sprintf(`query($p: ID!) { g%d: aroundMe(board: "p", playerId: $p, radius: %d) { `+
							`playerId rank tieRank score topPercent displayName metadata updatedAt } }`, g, i%3)
						a, b := prep.rawQuiet(reader, q, map[string]any{"p": p}), gen.rawQuiet(reader, q, map[string]any{"p": p})
						if !bytes.Equal(a, b) || len(a) == 0 {
							errs <- fmt.Sprintf("goroutine %d: %s\nprepared %s\n  gqlgen %s", g, q, a, b)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			// Most steps are prepared; the others (fragments, directives, an alias twice) stay gqlgen's.
			if n := graph.PreparedOperations() - before; n < int64(len(steps))*2/3 {
				t.Fatalf("%d of %d steps took the prepared path", n, len(steps))
			}
		})
	}
}

// preparedPair starts the two servers of a byte-for-byte comparison over the same Redis, with the same clock and
// their own key prefixes, set configures each (tested: the side under test, else gqlgen's generated code's), and
// creates preparedSteps' boards on both. reader is the key the steps read with ("" when no read key is required).
func preparedPair(t *testing.T, now time.Time, readKey bool, set func(cfg *Config, tested bool)) (tested, gen *testServer,
	reader string) {
	t.Helper()
	start := func(tested bool) *testServer {
		cfg := testConfig(t)
		cfg.KeyPrefix += fmt.Sprintf("-%v", tested)
		cfg.Clock = func() time.Time { return now }
		set(&cfg, tested)
		if readKey {
			cfg.APIKeys += ",read:" + testReadKey
		}
		return startServer(t, cfg)
	}
	tested, gen = start(true), start(false)
	for _, s := range []*testServer{tested, gen} {
		s.create(t, map[string]any{"id": "p", "windows": []string{"ALL_TIME", "DAILY"}, "maxScore": 9e15})
		s.create(t, map[string]any{"id": "px", "exactTop": 2, "order": "ASC"})
		s.create(t, map[string]any{"id": "slow", "maxSubmitsPerMinute": 1})
	}
	if readKey {
		reader = testReadKey
	}
	return tested, gen, reader
}

type preparedStep struct {
	key, query string
	vars       map[string]any
	want       string // a part the response must hold (that the step tests what it says)
}

func preparedSteps(reader string, now time.Time) []preparedStep {
	const all = `playerId displayName rank tieRank approximate score topPercent updatedAt metadata`
	const reversed = `metadata updatedAt topPercent score approximate tieRank rank displayName playerId`
	submit := func(sel string, in map[string]any) preparedStep {
		return preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { ` + sel + ` } }`,
			vars: map[string]any{"in": in}}
	}
	var steps []preparedStep
	names := []string{`<b>&"quoted"</b>`, "tab\tnew\nline\\ \u2028 \x01\x1b\r", "日本語 ✓", "plain"}
	scores := []float64{8e15, 0.0001, 1e-7, 1234567.25, 9e15, 42, 42}
	for i, sc := range scores {
		in := map[string]any{"board": "p", "playerId": fmt.Sprintf("p%d", i), "score": sc,
			"displayName": names[i%len(names)]}
		if i%2 == 0 {
			in["metadata"] = map[string]any{"html": "<script>&</script>", "n": 1.5, "nested": map[string]any{"a": []any{1, "\u2028"}}}
		}
		sel := `entry { ` + all + ` } previousRank previousScore updated duplicate __typename`
		if i%3 == 1 {
			sel = `d: duplicate u: updated ps: previousScore pr: previousRank e: entry { __typename ` + reversed + ` }`
		}
		steps = append(steps, submit(sel, in))
	}
	// Again: previous rank and score, an unchanged best score, a duplicate event.
	steps = append(steps,
		submit(`entry { rank score } previousRank previousScore updated`, map[string]any{"board": "p", "playerId": "p0", "score": 5.0}),
		submit(`entry { `+all+` } previousRank previousScore updated duplicate`, map[string]any{"board": "p", "playerId": "p3", "score": 8.5e15, "eventId": "e1"}),
		submit(`entry { `+all+` } previousRank previousScore updated duplicate`, map[string]any{"board": "p", "playerId": "p3", "score": 8.5e15, "eventId": "e1"}),
		submit(`entry { playerId }`, map[string]any{"board": "p", "playerId": "p9", "score": 1.0, "achievedAt": now.Add(-90*time.Second - 123*time.Millisecond).Format(time.RFC3339Nano)}),
		// Inputs whose arguments the prepared way decodes itself (graph/prepared.go): integer scores, nulls,
		// an ID sent as a number.
		submit(`entry { `+all+` } previousScore updated`, map[string]any{"board": "p", "playerId": "p10", "score": 7, "eventId": nil, "displayName": nil}),
		submit(`entry { `+all+` } updated duplicate`, map[string]any{"board": "p", "playerId": 11, "score": -3, "eventId": 12}),
	)
	for i := range 6 { // approximate ranks beyond exactTop 2, ascending
		steps = append(steps, submit(`entry { `+all+` } updated`, map[string]any{"board": "px", "playerId": fmt.Sprintf("x%d", i), "score": float64(10 * (i % 4))}))
	}
	// Errors of the resolver and of the arguments, on the prepared path.
	big := map[string]any{"s": strings.Repeat("m", 2000)}
	steps = append(steps,
		preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
			vars: map[string]any{"in": map[string]any{"board": "nope", "playerId": "a", "score": 1.0}}, want: `"NOT_FOUND"`},
		preparedStep{key: "", query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
			vars: map[string]any{"in": map[string]any{"board": "p", "playerId": "a", "score": 1.0}}, want: `"UNAUTHENTICATED"`},
		preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
			vars: map[string]any{"in": map[string]any{"board": "p", "playerId": "a", "score": 9.007e15}}, want: `"BAD_USER_INPUT"`},
		preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
			vars: map[string]any{"in": map[string]any{"board": "p", "playerId": "a", "score": 1.0, "metadata": big}}, want: `"BAD_USER_INPUT"`},
		submit(`updated`, map[string]any{"board": "slow", "playerId": "s", "score": 1.0}),
		preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
			vars: map[string]any{"in": map[string]any{"board": "slow", "playerId": "s", "score": 2.0}}, want: `"RATE_LIMITED"`},
		// submitScores: items that fail are null with their errors at their paths; the others stand.
		preparedStep{key: testSubmitKey, query: `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { ` + all + ` } previousRank previousScore updated duplicate __typename } }`,
			vars: map[string]any{"in": []any{
				map[string]any{"board": "p", "playerId": "b1", "score": 7.5, "displayName": "<b1>", "metadata": map[string]any{"k": "&"}},
				map[string]any{"board": "nope", "playerId": "b2", "score": 1.0},
				map[string]any{"board": "px", "playerId": "b3", "score": 15.0, "eventId": "bulk-1"},
				map[string]any{"board": "px", "playerId": "b3", "score": 15.0, "eventId": "bulk-1"},
				map[string]any{"board": "p", "playerId": "b4", "score": 9.007e15},
				map[string]any{"board": "slow", "playerId": "s", "score": 3.0},
			}}, want: `"path":["submitScores",1]`},
		preparedStep{key: testSubmitKey, query: `mutation($in: [ScoreInput!]!) { r: submitScores(inputs: $in) { u: updated e: entry { rank playerId } } }`,
			vars: map[string]any{"in": []any{}}, want: `{"data":{"r":[]}}`},
		preparedStep{key: testSubmitKey, query: `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			vars: map[string]any{"in": manyInputs(1001)}, want: `"BAD_USER_INPUT"`},
		preparedStep{key: "", query: `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			vars: map[string]any{"in": manyInputs(2)}, want: `"UNAUTHENTICATED"`},
		preparedStep{key: testSubmitKey, query: `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { ` + reversed + ` } updated } }`,
			vars: map[string]any{"in": manyInputs(40)}},
		// A literal input, no variables.
		preparedStep{key: testSubmitKey, query: `mutation { submitScore(input: {board: "p", playerId: "lit", score: 3.5, displayName: "<lit>"}) { entry { ` + all + ` } } }`},
	)
	if reader != "" {
		steps = append(steps,
			preparedStep{key: "", query: `query { rank(board: "p", playerId: "p1") { rank } }`, want: `"UNAUTHENTICATED"`},
			preparedStep{key: testSubmitKey, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
				vars: map[string]any{"in": map[string]any{"board": "p", "playerId": "a", "score": 1.0}}},
			preparedStep{key: reader, query: `mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
				vars: map[string]any{"in": map[string]any{"board": "p", "playerId": "a", "score": 1.0}}, want: `"FORBIDDEN"`},
		)
	}
	read := func(q string, vars map[string]any, want string) {
		steps = append(steps, preparedStep{key: reader, query: q, vars: vars, want: want})
	}
	for _, b := range []string{"p", "px"} {
		for _, p := range []string{"p0", "p1", "p2", "p3", "x1", "x4", "x5", "missing"} {
			read(`query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { `+all+` __typename } }`, map[string]any{"b": b, "p": p}, "")
			read(`query($b: ID!, $p: ID!) { me: rank(board: $b, playerId: $p) { `+reversed+` } }`, map[string]any{"b": b, "p": p}, "")
			for _, r := range []int{0, 1, 3} {
				read(`query($b: ID!, $p: ID!, $r: Int) { aroundMe(board: $b, playerId: $p, radius: $r) { `+all+` } }`,
					map[string]any{"b": b, "p": p, "r": r}, "")
			}
			read(`query($b: ID!, $p: ID!, $f: [ID!]!) { friends(board: $b, playerId: $p, friendIds: $f) { __typename `+all+` } }`,
				map[string]any{"b": b, "p": p, "f": []string{"p2", "x0", "x3", "p5", "nobody", "p9"}}, "")
		}
	}
	read(`query { rank(board: "p", playerId: "missing") { rank } }`, nil, `{"data":{"rank":null}}`)
	read(`query { rank(board: "px", playerId: "x5") { approximate } }`, nil, `"approximate":true`)
	read(`query { rank(board: "nope", playerId: "p1") { rank } }`, nil, `"NOT_FOUND"`)
	read(`query { rank(board: "p", playerId: "p1", window: WEEKLY) { rank } }`, nil, `"BAD_USER_INPUT"`)
	read(`query { aroundMe(board: "nope", playerId: "p1") { rank } }`, nil, `"NOT_FOUND"`)
	read(`query { friends(board: "p", playerId: "p1", friendIds: []) { rank playerId } }`, nil, "")
	read(`query { rank(board: "p", playerId: "p1", window: DAILY) { rank score } }`, nil, "")
	// Not prepared (fragments, directives, an alias twice, two root fields): gqlgen's on both.
	read(`query { rank(board: "p", playerId: "p1") { ...E } } fragment E on Entry { rank playerId }`, nil, "")
	read(`query($s: Boolean!) { rank(board: "p", playerId: "p1") { rank @skip(if: $s) playerId } }`, map[string]any{"s": true}, "")
	read(`query { rank(board: "p", playerId: "p1") { rank rank playerId } }`, nil, "")
	read(`query { rank(board: "p", playerId: "p1") { rank } __typename }`, nil, "")
	return steps
}

// manyInputs is n submissions to board p, players m0..m<n-1>.
func manyInputs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"board": "p", "playerId": fmt.Sprintf("m%d", i), "score": float64(i) / 4}
	}
	return out
}

// rawQuiet POSTs a GraphQL request from any goroutine and returns the response body (nil on a transport error).
func (s *testServer) rawQuiet(key, query string, vars map[string]any) []byte {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	resp, err := http.DefaultClient.Do(s.request(key, body))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
