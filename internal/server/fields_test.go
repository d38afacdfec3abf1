package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// entrySelections select parts of an Entry in every way a client may: a field, an alias, a fragment spread (F,
// entryFragment), an inline fragment, @include and @skip on variables (selectionVars).
var entrySelections = []string{
	`playerId tieRank`,
	`playerId t: tieRank u: updatedAt`,
	`...F`,
	`playerId ... on Entry { displayName metadata }`,
	`playerId updatedAt @include(if: $yes) tieRank @skip(if: $no) displayName @include(if: $no)`,
	`playerId rank score topPercent`,
}

const entryFragment = ` fragment F on Entry { playerId updatedAt displayName }`

// selectionVars returns the variable definitions and values a selection of entrySelections needs.
func selectionVars(sel string) (string, map[string]any) {
	if strings.Contains(sel, "$") {
		return "($yes: Boolean!, $no: Boolean!)", map[string]any{"yes": true, "no": false}
	}
	return "", nil
}

// dataRows returns the objects of a response's data: each root field's list, or its one object.
func dataRows(data json.RawMessage) []map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	json.Unmarshal(data, &fields)
	var rows []map[string]json.RawMessage
	for _, v := range fields {
		if bytes.HasPrefix(v, []byte("[")) {
			json.Unmarshal(v, &rows)
		} else {
			var one map[string]json.RawMessage
			json.Unmarshal(v, &one)
			rows = append(rows, one)
		}
	}
	return rows
}

// TestReadsFillWhatIsSelected: rank, aroundMe and friends read from Redis only the parts of entries their
// selection shows (graph's entryFields, leaderboard.Only), and every part a selection shows, however it is
// selected (a field, an alias, a fragment spread, an inline fragment, @include and @skip on variables), is what
// a full read of the test's own store gives. On the fast path (second runs) and on gqlgen's.
func TestReadsFillWhatIsSelected(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "sel"})
	for i := range 24 {
		in := map[string]any{"board": "sel", "playerId": fmt.Sprint("p", i), "score": float64(i / 3)} // ties of three
		if i%2 == 0 {
			in["displayName"], in["metadata"] = fmt.Sprint("<name ", i, ">"), map[string]any{"i": i}
		}
		s.submit(t, in)
	}
	full := map[string]leaderboard.Entry{}
	for i := range 24 {
		e, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "sel"}, fmt.Sprint("p", i))
		if err != nil || e == nil {
			t.Fatal(e, err)
		}
		full[e.PlayerID] = *e
	}
	for _, sel := range entrySelections {
		defs, vars := selectionVars(sel)
		for _, q := range []string{
			`query` + defs + ` { rank(board: "sel", playerId: "p10") { ` + sel + ` } }`,
			`query` + defs + ` { aroundMe(board: "sel", playerId: "p10", radius: 3) { ` + sel + ` } }`,
			`query` + defs + ` { friends(board: "sel", playerId: "p1", friendIds: ["p4", "p9", "p22", "x"]) { ` + sel + ` } }`,
		} {
			if sel == `...F` {
				q += entryFragment
			}
			for run := range 2 {
				resp := s.do(t, "", q, vars)
				if len(resp.Errors) > 0 {
					t.Fatalf("%s: %s", q, resp.Errors[0].Message)
				}
				rows := dataRows(resp.Data)
				if len(rows) == 0 {
					t.Fatalf("run %d, %s: no entries in %s", run, q, resp.Data)
				}
				for _, row := range rows {
					var id string
					json.Unmarshal(row["playerId"], &id)
					want := full[id]
					for k, v := range row {
						if !sameEntryField(k, v, want) {
							t.Fatalf("run %d, %s: %s of %s is %s, a full read has %+v", run, q, k, id, v, want)
						}
					}
				}
			}
		}
	}
}

// TestSubmissionsFillWhatIsSelected: submitScore and submitScores fill the parts of their entries the selection of
// entry shows (graph's resultFields), however they are selected, as a full read of the test's own store right
// after each submission has them. The store skips the others' Redis work (leaderboard's TestSubmitFields). On the
// fast path (second runs) and on gqlgen's.
func TestSubmissionsFillWhatIsSelected(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "subsel"})
	for i := range 12 {
		in := map[string]any{"board": "subsel", "playerId": fmt.Sprint("p", i), "score": float64(i / 3)} // ties of three
		if i%2 == 0 {
			in["displayName"], in["metadata"] = fmt.Sprint("<name ", i, ">"), map[string]any{"i": i}
		}
		s.submit(t, in)
	}
	score := 0
	for _, sel := range entrySelections {
		defs, vars := selectionVars(sel)
		for _, q := range []string{
			`mutation` + defs + ` { submitScore(input: {board: "subsel", playerId: "p4", score: SCORE}) { entry { ` + sel + ` } updated } }`,
			`mutation` + defs + ` { submitScores(inputs: [{board: "subsel", playerId: "p6", score: SCORE}]) { e: entry { ` + sel + ` } } }`,
		} {
			if sel == `...F` {
				q += entryFragment
			}
			for run := range 2 {
				score = (score + 1) % 4 // into and out of the ties
				doc := strings.Replace(q, "SCORE", fmt.Sprint(score), 1)
				result := submitOne(t, s, doc, vars)
				var row map[string]json.RawMessage
				for k, v := range result {
					if k == "entry" || k == "e" {
						json.Unmarshal(v, &row)
					}
				}
				var id string
				json.Unmarshal(row["playerId"], &id)
				full, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "subsel"}, id)
				if err != nil || full == nil {
					t.Fatal(id, full, err)
				}
				for k, v := range row {
					if !sameEntryField(k, v, *full) {
						t.Fatalf("run %d, %s: %s of %s is %s, a full read right after has %+v", run, doc, k, id, v, *full)
					}
				}
			}
		}
	}
}

// submitOne posts a mutation of one submission (submitScore, or submitScores of one item) and returns its result.
func submitOne(t *testing.T, s *testServer, doc string, vars map[string]any) map[string]json.RawMessage {
	t.Helper()
	resp := s.do(t, testSubmitKey, doc, vars)
	if len(resp.Errors) > 0 {
		t.Fatalf("%s: %s", doc, resp.Errors[0].Message)
	}
	results := dataRows(resp.Data)
	if len(results) != 1 {
		t.Fatalf("%s: %s", doc, resp.Data)
	}
	return results[0]
}

// sameEntryField reports whether a selected field's JSON (by its name or alias) holds what e has.
func sameEntryField(name string, v json.RawMessage, e leaderboard.Entry) bool {
	switch name {
	case "tieRank", "t":
		var n int64
		return json.Unmarshal(v, &n) == nil && n == e.TieRank
	case "updatedAt", "u":
		var at time.Time
		return json.Unmarshal(v, &at) == nil && at.Equal(e.UpdatedAt) && !at.IsZero()
	case "displayName":
		var s *string
		return json.Unmarshal(v, &s) == nil && (s == nil) == (e.DisplayName == nil) && (s == nil || *s == *e.DisplayName)
	case "metadata":
		if e.Metadata == nil {
			return string(v) == "null"
		}
		var a, b any
		return json.Unmarshal(v, &a) == nil && json.Unmarshal(e.Metadata, &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
	case "rank":
		var n int64
		return json.Unmarshal(v, &n) == nil && n == e.Rank
	case "score":
		var x float64
		return json.Unmarshal(v, &x) == nil && x == e.Score
	case "playerId", "topPercent":
		return true
	}
	return false
}

// TestPreviousRankWhenSelected: previousRank, however it is selected (alias, fragment, @include), is the player's
// rank right before the submission, also for a player far below the live top, whose previous rank the store
// leaves unread when it is not selected (leaderboard's TestPreviousRankOnlyWhenAsked); without it selected, a
// submission is still exact in what it shows. On the fast path (second runs) and on gqlgen's.
func TestPreviousRankWhenSelected(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "prevsel"})
	const players = leaderboard.LiveTop + 50
	var in []map[string]any
	for i := range players {
		in = append(in, map[string]any{"board": "prevsel", "playerId": fmt.Sprint("p", i), "score": float64(i)})
	}
	if resp := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in}); len(resp.Errors) > 0 {
		t.Fatal(resp.Errors[0].Message)
	}
	next := 0 // players p0, p1, ... rank last: each is raised by a half once, staying below the live top
	for _, sel := range []string{`previousRank`, `pr: previousRank`, `...R`, `previousRank @include(if: $yes)`, ``} {
		for _, q := range []string{
			`mutation($yes: Boolean!) { submitScore(input: {board: "prevsel", playerId: "PLAYER", score: SCORE}) { SEL entry { rank } } }`,
			`mutation($yes: Boolean!) { submitScores(inputs: [{board: "prevsel", playerId: "PLAYER", score: SCORE}]) { entry { rank } SEL } }`,
		} {
			q, vars := selectIn(q, sel)
			if sel == `...R` {
				q += ` fragment R on ScoreResult { previousRank }`
			}
			for run := range 2 {
				id := fmt.Sprint("p", next)
				next++
				before, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "prevsel"}, id)
				if err != nil || before == nil || before.Rank <= leaderboard.LiveTop {
					t.Fatal(id, before, err)
				}
				doc := strings.NewReplacer("PLAYER", id, "SCORE", fmt.Sprint(float64(next-1)+0.5)).Replace(q)
				result := submitOne(t, s, doc, vars)
				after, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "prevsel"}, id)
				if err != nil || after == nil {
					t.Fatal(id, after, err)
				}
				var entry struct{ Rank int64 }
				var prev *int64
				for k, v := range result {
					switch k {
					case "entry":
						json.Unmarshal(v, &entry)
					case "previousRank", "pr":
						if json.Unmarshal(v, &prev) != nil || prev == nil {
							t.Fatalf("run %d, %s: %s is %s", run, doc, k, v)
						}
					default:
						t.Fatalf("run %d, %s: unexpected field %s", run, doc, k)
					}
				}
				if entry.Rank != after.Rank || (sel == "") != (prev == nil) || prev != nil && *prev != before.Rank {
					got, _ := json.Marshal(result)
					t.Fatalf("run %d, %s: %s, rank before %d, after %d", run, doc, got, before.Rank, after.Rank)
				}
			}
		}
	}
}

// TestShardedRankWhenSelected: on a sharded board, whose store places a submission on the other shards only when
// its rank is asked (leaderboard.FieldRank), rank, topPercent and approximate, however they are selected (alias,
// fragment, @include), are the player's place on the whole board right after the submission, for players far
// below the top of their shards. On the fast path (second runs) and on gqlgen's.
func TestShardedRankWhenSelected(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "shardsel", "shards": 3})
	const players = 3 * (leaderboard.MaxFirst + 200)
	for i := 0; i < players; i += 1000 {
		var in []map[string]any
		for j := i; j < min(i+1000, players); j++ {
			in = append(in, map[string]any{"board": "shardsel", "playerId": fmt.Sprint("p", j), "score": float64(j)})
		}
		if resp := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": in}); len(resp.Errors) > 0 {
			t.Fatal(resp.Errors[0].Message)
		}
	}
	next := 0 // players p0, p1, ... rank last: each is raised by a half once, staying far below the top
	for _, sel := range []string{`rank`, `r: rank`, `...E`, `topPercent`, `approximate rank @include(if: $yes)`} {
		for _, q := range []string{
			`mutation($yes: Boolean!) { submitScore(input: {board: "shardsel", playerId: "PLAYER", score: SCORE}) { entry { SEL } } }`,
			`mutation($yes: Boolean!) { submitScores(inputs: [{board: "shardsel", playerId: "PLAYER", score: SCORE}]) { e: entry { SEL } } }`,
		} {
			q, vars := selectIn(q, sel)
			if sel == `...E` {
				q += ` fragment E on Entry { rank topPercent }`
			}
			for run := range 2 {
				id := fmt.Sprint("p", next)
				next++
				doc := strings.NewReplacer("PLAYER", id, "SCORE", fmt.Sprint(float64(next-1)+0.5)).Replace(q)
				result := submitOne(t, s, doc, vars)
				after, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "shardsel"}, id)
				if err != nil || after == nil || after.Rank <= players-leaderboard.MaxFirst {
					t.Fatal(id, after, err)
				}
				var row map[string]json.RawMessage
				for _, v := range result {
					json.Unmarshal(v, &row)
				}
				if len(row) == 0 {
					t.Fatalf("run %d, %s: no entry fields", run, doc)
				}
				for k, v := range row {
					ok := false
					switch k {
					case "rank", "r":
						var n int64
						ok = json.Unmarshal(v, &n) == nil && n == after.Rank
					case "topPercent":
						var x float64
						ok = json.Unmarshal(v, &x) == nil && x == after.TopPercent && x > 0
					case "approximate":
						var a bool
						ok = json.Unmarshal(v, &a) == nil && a == after.Approximate
					}
					if !ok {
						t.Fatalf("run %d, %s: %s is %s, a full read right after has %+v", run, doc, k, v, *after)
					}
				}
			}
		}
	}
}

// selectIn puts sel in place of SEL in the operation q, which declares ($yes: Boolean!): the variables to send
// when sel uses $yes (true), else q without the declaration.
func selectIn(q, sel string) (string, map[string]any) {
	q = strings.Replace(q, "SEL", sel, 1)
	if strings.Contains(sel, "$yes") {
		return q, map[string]any{"yes": true}
	}
	return strings.Replace(q, "($yes: Boolean!)", "", 1), nil
}
