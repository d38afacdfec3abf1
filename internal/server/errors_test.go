package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestErrors(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "e", "minScore": 0, "maxScore": 1000})

	t.Run("not found", func(t *testing.T) {
		for _, q := range []string{
			`{ top(board: "nope") { rank } }`,
			`{ rank(board: "nope", playerId: "p") { rank } }`,
			`{ aroundMe(board: "nope", playerId: "p") { rank } }`,
			`{ friends(board: "nope", playerId: "p", friendIds: []) { rank } }`,
		} {
			s.wantCode(t, "", "NOT_FOUND", q, nil)
		}
		s.wantCode(t, testSubmitKey, "NOT_FOUND", `mutation { submitScore(input: {board: "nope", playerId: "p", score: 1}) { updated } }`, nil)
		s.wantCode(t, testAdminKey, "NOT_FOUND", `mutation { removePlayer(board: "nope", playerId: "p") }`, nil)
		var out struct{ Leaderboard *struct{ ID string } }
		s.must(t, "", `{ leaderboard(id: "nope") { id } }`, nil, &out)
		if out.Leaderboard != nil {
			t.Fatal("leaderboard of an unknown id must be null")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		long := strings.Repeat("x", 129)
		bigMeta := map[string]any{"blob": strings.Repeat("y", 1100)}
		sub := func(in map[string]any) {
			t.Helper()
			in["board"] = "e"
			if _, ok := in["playerId"]; !ok {
				in["playerId"] = "p"
			}
			if _, ok := in["score"]; !ok {
				in["score"] = 1
			}
			t.Logf("input %v", in)
			s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", submitMutation, map[string]any{"in": in})
		}
		sub(map[string]any{"score": 1e300})
		sub(map[string]any{"score": 9007199254740993.0 * 2})
		sub(map[string]any{"score": -1})   // below minScore
		sub(map[string]any{"score": 1001}) // above maxScore
		sub(map[string]any{"playerId": ""})
		sub(map[string]any{"playerId": long})
		sub(map[string]any{"eventId": long})
		sub(map[string]any{"displayName": long})
		sub(map[string]any{"metadata": bigMeta})
		sub(map[string]any{"metadata": "not an object"})
		sub(map[string]any{"metadata": []any{1, 2}})
		sub(map[string]any{"achievedAt": "yesterday"})
		sub(map[string]any{"achievedAt": time.Now().Add(time.Hour).Format(time.RFC3339)})
		sub(map[string]any{"score": "12"})

		bad := []map[string]any{
			{"id": ""}, {"id": long}, {"id": "b", "timezone": "Mars/Olympus"}, {"id": "b", "timezone": ""},
			{"id": "b", "windows": []string{}}, {"id": "b", "windows": []string{"DAILY", "DAILY"}},
			{"id": "b", "windows": []string{"HOURLY"}}, {"id": "b", "exactTop": 0}, {"id": "b", "exactTop": -5},
			{"id": "b", "minScore": 10, "maxScore": 1}, {"id": "b", "order": "UP"}, {"id": "b", "title": strings.Repeat("t", 300)},
		}
		for _, in := range bad {
			s.wantCode(t, testAdminKey, "BAD_USER_INPUT", createMutation, map[string]any{"in": in})
		}
		var out struct{ Leaderboards []struct{ ID string } }
		s.must(t, "", `{ leaderboards { id } }`, nil, &out)
		if len(out.Leaderboards) != 1 {
			t.Fatalf("rejected definitions must change nothing: %+v", out.Leaderboards)
		}
		if got := s.top(t, "e", 10); len(got) != 0 {
			t.Fatalf("rejected scores must change nothing: %+v", got)
		}
	})

	t.Run("limits", func(t *testing.T) {
		many := make([]string, 1001)
		for i := range many {
			many[i] = fmt.Sprint(i)
		}
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", first: 1001) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", first: -1) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ top(board: "e", offset: -1) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `{ aroundMe(board: "e", playerId: "p", radius: 101) { rank } }`, nil)
		s.wantCode(t, "", "BAD_USER_INPUT", `query($f: [ID!]!) { friends(board: "e", playerId: "p", friendIds: $f) { rank } }`,
			map[string]any{"f": many})
		items := make([]map[string]any, 1001)
		for i := range items {
			items[i] = map[string]any{"board": "e", "playerId": fmt.Sprint(i), "score": 1}
		}
		s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": items})
		// Depth: the schema has no recursion, but introspection does.
		deep := `{ __schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } } } } } } }`
		s.wantCode(t, "", "BAD_USER_INPUT", deep, nil)
		// Complexity: many aliases of a large page.
		var b strings.Builder
		b.WriteString("{")
		for i := range 20 {
			fmt.Fprintf(&b, ` t%d: top(board: "e", first: 1000) { playerId rank score topPercent }`, i)
		}
		b.WriteString("}")
		r := s.wantCode(t, "", "BAD_USER_INPUT", b.String(), nil)
		if r.Errors[0].Extensions["reason"] != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("complexity error %+v", r.Errors[0])
		}
		// Body size.
		huge := `{"query": "{ leaderboards { id } }", "variables": {"pad": "` + strings.Repeat("z", 2<<20) + `"}}`
		r = s.post(t, "", []byte(huge))
		if r.Status != http.StatusRequestEntityTooLarge || len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Errorf("oversized body: %+v", r)
		}
	})

	t.Run("partial failure", func(t *testing.T) {
		var out struct{ SubmitScores []*scoreResult }
		r := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId rank } duplicate } }`,
			map[string]any{"in": []map[string]any{
				{"board": "e", "playerId": "ok1", "score": 5, "eventId": "x1"},
				{"board": "nope", "playerId": "ok2", "score": 5},
				{"board": "e", "playerId": "bad", "score": 5000},
				{"board": "e", "playerId": "ok3", "score": 7},
				{"board": "e", "playerId": "ok1", "score": 5, "eventId": "x1"},
			}})
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatal(err)
		}
		res := out.SubmitScores
		if len(res) != 5 || res[0] == nil || res[1] != nil || res[2] != nil || res[3] == nil || res[4] == nil ||
			res[0].Duplicate || !res[4].Duplicate {
			t.Fatalf("results %s", r.Data)
		}
		if len(r.Errors) != 2 || fmt.Sprint(r.Errors[0].Path) != "[submitScores 1]" || r.Errors[0].Code() != "NOT_FOUND" ||
			fmt.Sprint(r.Errors[1].Path) != "[submitScores 2]" || r.Errors[1].Code() != "BAD_USER_INPUT" {
			t.Fatalf("errors %+v", r.Errors)
		}
		if got := ids(s.top(t, "e", 10)); got != "ok3:1 ok1:2" {
			t.Fatalf("the valid items are applied: %s", got)
		}
	})

	t.Run("graphql errors", func(t *testing.T) {
		r := s.do(t, "", `{ nope }`, nil)
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["reason"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("validation: %+v", r)
		}
		r = s.do(t, "", `{ top(`, nil)
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["reason"] != "GRAPHQL_PARSE_FAILED" {
			t.Errorf("parse: %+v", r)
		}
		r = s.post(t, "", []byte(`{"query": `))
		if r.Status != http.StatusBadRequest || len(r.Errors) != 1 {
			t.Errorf("undecodable body: %+v", r)
		}
		// An undecodable body is not echoed back at length.
		r = s.post(t, "", []byte(`{"query": `+strings.Repeat("x", 100_000)))
		if r.Status != http.StatusBadRequest || len(r.Errors) != 1 || len(r.Errors[0].Message) > 400 {
			t.Errorf("long undecodable body: status %d, %d errors, message of %d bytes", r.Status, len(r.Errors),
				len(r.Errors[0].Message))
		}
		req, _ := http.NewRequest(http.MethodGet, s.URL+`/graphql?query=mutation{removePlayer(board:"e",playerId:"x")}`, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		if r := doRequest(t, req); len(r.Errors) != 1 || r.Status < 400 {
			t.Errorf("mutation over GET: %+v", r)
		}
		req, _ = http.NewRequest(http.MethodGet, s.URL+`/graphql?query={leaderboards{id}}`, nil)
		if r := doRequest(t, req); len(r.Errors) != 0 || r.Status != 200 {
			t.Errorf("query over GET: %+v", r)
		}
	})
}

// Scores are bounded by their exact decimal value, as the client wrote it: 9007199254740993 (which a float64
// rounds to 2^53) is refused in variables and in literals, 2^53 itself is accepted, and a refusal writes nothing.
func TestScoreDecimals(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "dec", "mode": "LATEST"})
	viaVariables := func(score string) gqlResponse {
		body := `{"query":"mutation($in: ScoreInput!) { submitScore(input: $in) { updated entry { score } } }",` +
			`"variables":{"in":{"board":"dec","playerId":"v","score":` + score + `}}}`
		return s.post(t, testSubmitKey, []byte(body))
	}
	viaLiteral := func(score string) gqlResponse {
		return s.do(t, testSubmitKey, `mutation { submitScore(input: {board: "dec", playerId: "l", score: `+score+`}) {
			updated entry { score } } }`, nil)
	}
	for _, score := range []string{"9007199254740993", "-9007199254740993", "9007199254740993.0", "9.007199254740993e15",
		"9007199254740992.000001", "90071992547409921e-1", "1e400", "-1e17"} {
		for name, send := range map[string]func(string) gqlResponse{"variables": viaVariables, "literal": viaLiteral} {
			r := send(score)
			if len(r.Errors) == 0 || slices.ContainsFunc(r.Codes(), func(c string) bool { return c != "BAD_USER_INPUT" }) {
				t.Fatalf("%s score %s: status %d errors %+v data %s", name, score, r.Status, r.Errors, r.Data)
			}
		}
	}
	if r := s.do(t, testAdminKey, `mutation { createLeaderboard(input: {id: "dec2", maxScore: 9007199254740993.0}) { id } }`,
		nil); len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
		t.Fatalf("maxScore literal above 2^53: %+v", r.Errors)
	}
	if got := s.top(t, "dec", 10); len(got) != 0 {
		t.Fatalf("refused scores were written: %+v", got)
	}
	for name, send := range map[string]func(string) gqlResponse{"variables": viaVariables, "literal": viaLiteral} {
		for _, score := range []string{"9007199254740992", "-9.007199254740992e15", "9007199254740991.9999"} {
			if r := send(score); len(r.Errors) != 0 {
				t.Fatalf("%s score %s: %+v", name, score, r.Errors)
			}
		}
	}
	got := s.top(t, "dec", 10)
	if len(got) != 2 || got[0].Score != 1<<53 || got[1].Score != 1<<53 {
		t.Fatalf("top after the accepted scores: %+v", got)
	}
}
