package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// scoreTexts are decimals on either side of the score bound, several of which a float64 rounds to ±2^53.
var scoreTexts = []string{"9007199254740993", "-9007199254740993", "9007199254740992", "-9007199254740992",
	"9007199254740992.5", "9.007199254740993e15", "9007199254740991.9999", "90071992547409921e-1", "4200", "1e20"}

// withinScoreBound is the oracle of the score rule: the exact value of the decimal, by math/big, has magnitude at
// most 2^53.
func withinScoreBound(t *testing.T, text string) bool {
	t.Helper()
	x, _, err := big.ParseFloat(text, 10, 4096, big.ToNearestEven)
	if err != nil {
		t.Fatalf("oracle: %q: %v", text, err)
	}
	return x.Abs(x).Cmp(new(big.Float).SetInt64(1<<53)) <= 0
}

func float64Of(t *testing.T, text string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A Float variable at the top level of an operation ($s: Float!) is judged by the decimal the client sent, as a
// Float nested in an input object is: in submitScore, rankForScore and createLeaderboard, over HTTP (gqlgen, and the
// fast path once the document is known) and over a websocket. An accepted score is stored as sent (read back by a
// store of the test's own); a refused one is BAD_USER_INPUT and writes nothing. (gqlparser's variable coercion
// turns a top-level Float into a float64 first: 9007199254740993 was stored as 2^53.)
func TestTopLevelFloatVariablesAreExact(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "exact", "mode": "LATEST"})
	const submit = `mutation($p: ID!, $s: Float!) { submitScore(input: {board: "exact", playerId: $p, score: $s}) { entry { score } } }`
	const estimate = `query($s: Float!) { rankForScore(board: "exact", score: $s) { score } }`
	const create = `mutation($id: ID!, $m: Float) { createLeaderboard(input: {id: $id, maxScore: $m}) { maxScore } }`
	// gqlgen runs each document once; later requests of it take the fast path.
	s.must(t, testSubmitKey, submit, map[string]any{"p": "warm", "s": 1}, nil)
	s.must(t, "", estimate, map[string]any{"s": 1}, nil)
	ws := wstest.Dial(t, s.WSURL, wstest.TransportWS, map[string]any{"authorization": "Bearer " + testSubmitKey})
	ctx := ctxT(t, time.Minute)
	overWS := func(id string, vars map[string]any) []wstest.Error {
		if err := ws.Subscribe(id, submit, vars); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := ws.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != id {
				continue
			}
			if m.IsData() || m.Type == "error" {
				return m.Errors()
			}
		}
	}
	fastBefore := s.App.fast.Operations()
	for i, text := range scoreTexts {
		want := withinScoreBound(t, text)
		n := json.Number(text)
		checks := map[string][]gqlError{}
		for _, via := range []string{"http", "fast"} {
			p := fmt.Sprintf("%s-%d", via, i)
			checks["submitScore over "+via+" ("+p+")"] = s.do(t, testSubmitKey, submit, map[string]any{"p": p, "s": n}).Errors
		}
		checks["submitScore over a websocket (ws-"+strconv.Itoa(i)+")"] = overWS(strconv.Itoa(i),
			map[string]any{"p": "ws-" + strconv.Itoa(i), "s": n})
		checks["rankForScore"] = s.do(t, "", estimate, map[string]any{"s": n}).Errors
		checks["rankForScore over an event stream (GET)"] = streamGETErrors(t, s, estimate, map[string]any{"s": n})
		vars, _ := json.Marshal(map[string]any{"s": n})
		get, _ := http.NewRequest(http.MethodGet, s.URL+"/graphql?"+url.Values{"query": {estimate},
			"variables": {string(vars)}}.Encode(), nil)
		checks["rankForScore over GET"] = doRequest(t, get).Errors
		checks["createLeaderboard maxScore"] = s.do(t, testAdminKey, create,
			map[string]any{"id": fmt.Sprint("bound-", i), "m": n}).Errors
		for what, errs := range checks {
			switch {
			case want && len(errs) != 0:
				t.Errorf("%s with %s (within the bound): %+v", what, text, errs)
			case !want && (len(errs) != 1 || errs[0].Code() != string(leaderboard.Invalid)):
				t.Errorf("%s with %s (beyond the bound): %+v, want one BAD_USER_INPUT", what, text, errs)
			}
		}
		for _, p := range []string{"http-", "fast-", "ws-"} {
			e, err := s.Store.Rank(ctx, leaderboard.View{Board: "exact"}, p+strconv.Itoa(i))
			switch {
			case err != nil:
				t.Fatal(err)
			case want && (e == nil || e.Score != float64Of(t, text)):
				t.Errorf("%s%d stored %+v, want %s", p, i, e, text)
			case !want && e != nil:
				t.Errorf("%s%d: a refused score was stored: %+v", p, i, e)
			}
		}
	}
	if n := s.App.fast.Operations() - fastBefore; n < int64(len(scoreTexts)) {
		t.Errorf("the fast path ran %d operations, want at least %d (it must apply the rule too)", n, len(scoreTexts))
	}
}

// One item of submitScores with a score beyond 2^53 is null with BAD_USER_INPUT at its own path, and the other
// items are applied, whether the items come in a list variable or as input objects whose scores are top-level
// Float variables; over gqlgen and the fast path alike. (It used to fail the whole call in coercion.)
func TestBulkScoreOutOfRangeIsTheItemsError(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "bulk", "mode": "LATEST"})
	const list = `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId score } } }`
	const items = `mutation($pa: ID!, $pb: ID!, $pc: ID!, $a: Float!, $b: Float!, $c: Float!) { submitScores(inputs: [
		{board: "bulk", playerId: $pa, score: $a}, {board: "bulk", playerId: $pb, score: $b},
		{board: "bulk", playerId: $pc, score: $c}]) { entry { playerId score } } }`
	check := func(what string, texts []string, r gqlResponse, players []string) {
		t.Helper()
		var data struct{ SubmitScores []*struct{ Entry entry } }
		if r.Status != 200 || json.Unmarshal(r.Data, &data) != nil || len(data.SubmitScores) != len(texts) {
			t.Fatalf("%s: status %d data %s errors %+v", what, r.Status, r.Data, r.Errors)
		}
		bad := map[string]bool{}
		for _, e := range r.Errors {
			bad[fmt.Sprint(e.Path)] = true
			if e.Code() != string(leaderboard.Invalid) {
				t.Errorf("%s: %+v, want BAD_USER_INPUT", what, e)
			}
		}
		for i, text := range texts {
			want := withinScoreBound(t, text)
			path := fmt.Sprintf("[submitScores %d]", i)
			if bad[path] == want || (data.SubmitScores[i] != nil) != want {
				t.Errorf("%s: item %d (%s): result %+v, error at its path %v", what, i, text, data.SubmitScores[i], bad[path])
			}
			e, err := s.Store.Rank(ctxT(t, 10*time.Second), leaderboard.View{Board: "bulk"}, players[i])
			if err != nil {
				t.Fatal(err)
			}
			if want != (e != nil) || want && e.Score != float64Of(t, text) {
				t.Errorf("%s: item %d (%s) stored %+v", what, i, text, e)
			}
		}
		if len(r.Errors) != len(texts)-countWithin(t, texts) {
			t.Errorf("%s: errors %+v", what, r.Errors)
		}
	}
	texts := []string{"10", "9007199254740993", "20", "1e20", "-9007199254740993.0", "9007199254740992"}
	for run := range 2 { // the second run of each document takes the fast path
		var in []map[string]any
		var players []string
		for i, text := range texts {
			p := fmt.Sprintf("list-%d-%d", run, i)
			players = append(players, p)
			in = append(in, map[string]any{"board": "bulk", "playerId": p, "score": json.Number(text)})
		}
		check(fmt.Sprint("a list variable, run ", run), texts, s.do(t, testSubmitKey, list, map[string]any{"in": in}), players)
	}
	for run, abc := range [][]string{{"9007199254740993", "5", "7"}, {"1", "-9007199254740993", "3"}} {
		players := []string{fmt.Sprint("var-a-", run), fmt.Sprint("var-b-", run), fmt.Sprint("var-c-", run)}
		vars := map[string]any{"a": json.Number(abc[0]), "b": json.Number(abc[1]), "c": json.Number(abc[2]),
			"pa": players[0], "pb": players[1], "pc": players[2]}
		check(fmt.Sprint("top-level Float variables, run ", run), abc, s.do(t, testSubmitKey, items, vars), players)
	}
}

func countWithin(t *testing.T, texts []string) int {
	n := 0
	for _, text := range texts {
		if withinScoreBound(t, text) {
			n++
		}
	}
	return n
}

// streamGETErrors runs a query as an EventSource sends it (GET, the request in the URL, Accept: text/event-stream)
// and returns the errors of its result.
func streamGETErrors(t *testing.T, s *testServer, query string, vars map[string]any) []gqlError {
	t.Helper()
	b, _ := json.Marshal(vars)
	u := s.URL + "/graphql?" + url.Values{"query": {query}, "variables": {string(b)}}.Encode()
	req, _ := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodGet, u, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var r gqlResponse
			if err := json.Unmarshal([]byte(data), &r); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			return r.Errors
		}
	}
	t.Fatalf("GET event stream: status %d, no result", resp.StatusCode)
	return nil
}
