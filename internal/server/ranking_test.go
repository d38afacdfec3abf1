package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// tieModel is the competition ranking a test computes itself: scores, and the order in which each player reached
// their score (fair ties).
type tieModel struct {
	desc    bool
	score   map[string]float64
	arrival map[string]int
	seq     int
}

// latest records a LATEST submission.
func (m *tieModel) latest(p string, x float64) {
	m.seq++
	if old, ok := m.score[p]; ok && old == x {
		return
	}
	m.score[p], m.arrival[p] = x, m.seq
}

func (m *tieModel) better(a, b float64) bool { return a > b == m.desc && a != b }

// ranks returns the fair order and every player's rank and tieRank.
func (m *tieModel) ranks() (order []string, rank, tie map[string]int) {
	for p := range m.score {
		order = append(order, p)
	}
	slices.SortFunc(order, func(a, b string) int {
		switch {
		case m.better(m.score[a], m.score[b]):
			return -1
		case m.better(m.score[b], m.score[a]):
			return 1
		}
		return m.arrival[a] - m.arrival[b]
	})
	rank, tie = map[string]int{}, map[string]int{}
	for i, p := range order {
		rank[p], tie[p] = i+1, i+1
		if i > 0 && m.score[order[i-1]] == m.score[p] {
			tie[p] = tie[order[i-1]]
		}
	}
	return order, rank, tie
}

// tieRank through GraphQL, against the test's own model, on a DESC and an ASC board with many ties: every entry of
// top (the hub's cached list and a Redis page beyond it), rank, aroundMe, friends and submitScore's entry; and live:
// a topUpdates list rebuilt from its diffs and a rankUpdates stream end at the model's tieRanks.
func TestTieRankGraphQL(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	for _, order := range []string{"DESC", "ASC"} {
		t.Run(order, func(t *testing.T) {
			board := "ties-" + order
			s.create(t, map[string]any{"id": board, "order": order, "mode": "LATEST"})
			m := &tieModel{desc: order == "DESC", score: map[string]float64{}, arrival: map[string]int{}}
			conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			lists := map[string]*liveList{"top": {first: 20}}
			pump(t, conn, lists)
			if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": board, "n": 20}); err != nil {
				t.Fatal(err)
			}
			rankConn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			if err := rankConn.Subscribe("me", `subscription($b: ID!) { rankUpdates(board: $b, playerId: "p00") {
				playerId rank tieRank score } }`, map[string]any{"b": board}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, uint64(len(order))))
			for i := range 150 {
				p := fmt.Sprintf("p%02d", rng.IntN(40))
				x := float64(rng.IntN(6))
				r := s.submit(t, map[string]any{"board": board, "playerId": p, "score": x})
				m.latest(p, x)
				_, rank, tie := m.ranks()
				if r.Entry.Rank != rank[p] || r.Entry.TieRank != tie[p] {
					t.Fatalf("submission %d (%s: %v): rank %d tieRank %d, want %d %d", i, p, x, r.Entry.Rank,
						r.Entry.TieRank, rank[p], tie[p])
				}
			}
			m.latest("p00", 3) // p00 surely has a score, in a tie group
			s.submit(t, map[string]any{"board": board, "playerId": "p00", "score": 3})
			ids, rank, tie := m.ranks()
			check := func(where string, es []entry) {
				t.Helper()
				for _, e := range es {
					if e.Rank != rank[e.PlayerID] || e.TieRank != tie[e.PlayerID] || e.Score != m.score[e.PlayerID] {
						t.Fatalf("%s: %+v, want rank %d tieRank %d score %v", where, e, rank[e.PlayerID],
							tie[e.PlayerID], m.score[e.PlayerID])
					}
				}
			}
			var out struct {
				Top, Hub, Page, AroundMe, Friends []entry
				Rank                              *entry
			}
			q := `query($b: ID!, $p: ID!, $f: [ID!]!) {
				top(board: $b, first: 1000) { ` + entryFields + ` }
				hub: top(board: $b, first: 20) { ` + entryFields + ` }
				page: top(board: $b, first: 7, offset: 13) { ` + entryFields + ` }
				rank(board: $b, playerId: $p) { ` + entryFields + ` }
				aroundMe(board: $b, playerId: $p, radius: 3) { ` + entryFields + ` }
				friends(board: $b, playerId: $p, friendIds: $f) { ` + entryFields + ` } }`
			for _, p := range ids {
				s.must(t, "", q, map[string]any{"b": board, "p": p, "f": ids}, &out)
				if len(out.Top) != len(ids) || len(out.Page) != 7 || out.Rank == nil || len(out.Friends) != len(ids) {
					t.Fatalf("%s: %d top rows, %d page rows, rank %v, %d friends", p, len(out.Top), len(out.Page),
						out.Rank, len(out.Friends))
				}
				for k, e := range out.Top {
					if e.PlayerID != ids[k] {
						t.Fatalf("top row %d is %s, want %s", k, e.PlayerID, ids[k])
					}
				}
				check("top", out.Top)
				check("top page", out.Page)
				check("top from the hub", out.Hub)
				var cached struct{ Top []entry } // a query of top fields only: the response cache's path
				s.must(t, "", `query($b: ID!) { top(board: $b, first: 20) { `+entryFields+` } }`,
					map[string]any{"b": board}, &cached)
				check("cached top", cached.Top)
				if len(out.Hub) != 20 || len(cached.Top) != 20 {
					t.Fatalf("%d and %d rows of the top 20", len(out.Hub), len(cached.Top))
				}
				check("rank", []entry{*out.Rank})
				check("aroundMe", out.AroundMe)
				check("friends", out.Friends)
			}
			waitLive(t, s, lists["top"], board, 5*time.Second)
			l := lists["top"]
			l.mu.Lock()
			for _, e := range l.list {
				if int(e.TieRank) != tie[e.PlayerID] {
					t.Errorf("live list: %s tieRank %d, want %d", e.PlayerID, e.TieRank, tie[e.PlayerID])
				}
			}
			l.mu.Unlock()
			ctx := ctxT(t, 10*time.Second)
			for { // rank updates are coalesced: read until the settled entry
				var u struct {
					RankUpdates entry `json:"rankUpdates"`
				}
				rankConn.NextData(t, ctx, "me", &u)
				if u.RankUpdates.Rank == rank["p00"] && u.RankUpdates.TieRank == tie["p00"] && u.RankUpdates.Score == 3 {
					break
				}
			}
		})
	}
}

// rankForScore through GraphQL: every field on a board with ties, a score that would land beyond exactTop, and
// the score rules of a submission (BAD_USER_INPUT, also for a literal beyond 2^53), NOT_FOUND for no board.
func TestRankForScoreGraphQL(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "rfs", "minScore": 0, "maxScore": 1000, "exactTop": 2})
	for i, x := range []float64{50, 40, 40, 40, 10} {
		s.submit(t, map[string]any{"board": "rfs", "playerId": fmt.Sprintf("p%d", i), "score": x})
	}
	const q = `query($b: ID!, $x: Float!) { rankForScore(board: $b, score: $x) {
		score rank tieRank topPercent approximate size window period } }`
	type estimate struct {
		Score       float64 `json:"score"`
		Rank        int     `json:"rank"`
		TieRank     int     `json:"tieRank"`
		TopPercent  float64 `json:"topPercent"`
		Approximate bool    `json:"approximate"`
		Size        int     `json:"size"`
		Window      string  `json:"window"`
		Period      string  `json:"period"`
	}
	for _, c := range []struct {
		x    float64
		want estimate
	}{
		{60, estimate{60, 1, 1, 100.0 / 6, false, 5, "ALL_TIME", "all"}},
		{50, estimate{50, 2, 1, 200.0 / 6, false, 5, "ALL_TIME", "all"}},
		{40, estimate{40, 5, 2, 500.0 / 6, true, 5, "ALL_TIME", "all"}}, // the tier (50, 40) is full: the tail
		{0, estimate{0, 6, 6, 100, true, 5, "ALL_TIME", "all"}},
	} {
		var out struct{ RankForScore estimate }
		s.must(t, "", q, map[string]any{"b": "rfs", "x": c.x}, &out)
		if out.RankForScore != c.want {
			t.Errorf("score %v: %+v, want %+v", c.x, out.RankForScore, c.want)
		}
	}
	for _, x := range []any{-1, 1000.5, json.Number("9007199254740993")} {
		s.wantCode(t, "", string(leaderboard.Invalid), q, map[string]any{"b": "rfs", "x": x})
	}
	s.wantCode(t, "", string(leaderboard.Invalid), `{ rankForScore(board: "rfs", score: 1e400) { rank } }`, nil)
	s.wantCode(t, "", string(leaderboard.NotFound), q, map[string]any{"b": "nope", "x": 1})
}

// maxSubmitsPerMinute through GraphQL: shown on the board (null when unset), part of the definition (CONFLICT
// when different), bounded to 1..100000; past the limit submitScore is RATE_LIMITED and a submitScores item is
// null with RATE_LIMITED at its path while the others are applied.
func TestSubmitLimitGraphQL(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	const show = `query($id: ID!) { leaderboard(id: $id) { maxSubmitsPerMinute } }`
	s.create(t, map[string]any{"id": "limited", "maxSubmitsPerMinute": 2})
	s.create(t, map[string]any{"id": "free"})
	for id, want := range map[string]string{"limited": `{"leaderboard":{"maxSubmitsPerMinute":2}}`,
		"free": `{"leaderboard":{"maxSubmitsPerMinute":null}}`} {
		if r := s.do(t, "", show, map[string]any{"id": id}); string(r.Data) != want {
			t.Errorf("%s: %s, want %s", id, r.Data, want)
		}
	}
	s.wantCode(t, testAdminKey, string(leaderboard.Conflict), createMutation,
		map[string]any{"in": map[string]any{"id": "limited", "maxSubmitsPerMinute": 3}})
	for _, n := range []int{0, 100001} {
		s.wantCode(t, testAdminKey, string(leaderboard.Invalid), createMutation,
			map[string]any{"in": map[string]any{"id": "bad", "maxSubmitsPerMinute": n}})
	}
	// Three items of one player in one call (one script run, one minute): the third is refused alone.
	const many = `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId score } } }`
	in := []map[string]any{{"board": "limited", "playerId": "p", "score": 1},
		{"board": "limited", "playerId": "p", "score": 2}, {"board": "limited", "playerId": "p", "score": 3},
		{"board": "limited", "playerId": "q", "score": 1}}
	r := s.do(t, testSubmitKey, many, map[string]any{"in": in})
	if r.Status != http.StatusOK || len(r.Errors) != 1 || r.Errors[0].Code() != string(leaderboard.RateLimited) ||
		fmt.Sprint(r.Errors[0].Path) != "[submitScores 2]" {
		t.Fatalf("batch: status %d errors %+v", r.Status, r.Errors)
	}
	if want := `{"submitScores":[{"entry":{"playerId":"p","score":1}},{"entry":{"playerId":"p","score":2}},null,{"entry":{"playerId":"q","score":1}}]}`; string(r.Data) != want {
		t.Fatalf("batch: %s, want %s", r.Data, want)
	}
	e, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "limited"}, "p")
	if err != nil || e.Score != 2 {
		t.Fatalf("p after the batch: %+v %v", e, err)
	}
	// submitScore: a player's first two calls are applied, the third is refused, unless a minute turned between
	// them; then a new player tries again (minutes do not turn at every call).
	for try := 0; ; try++ {
		call := func() gqlResponse {
			return s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "limited",
				"playerId": fmt.Sprintf("z%d", try), "score": 1}})
		}
		r1, r2, r3 := call(), call(), call()
		if len(r1.Errors)+len(r2.Errors) > 0 {
			t.Fatalf("submitScore within the limit: %+v %+v", r1.Errors, r2.Errors)
		}
		if slices.Equal(r3.Codes(), []string{string(leaderboard.RateLimited)}) && string(r3.Data) == "null" {
			break
		}
		if try == 3 {
			t.Fatalf("submitScore past the limit: %+v %s", r3.Errors, r3.Data)
		}
	}
}

// README, GraphQL tour step 7, verbatim, on the tour's board (steps 1 and 2).
func TestReadmeRankingTour(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.must(t, testAdminKey, `mutation {
		createLeaderboard(input: {id: "arena", title: "Arena", order: DESC, mode: BEST, windows: [ALL_TIME, DAILY]}) { id } }`,
		nil, nil)
	for _, in := range []map[string]any{{"board": "arena", "playerId": "ann", "score": 4200},
		{"board": "arena", "playerId": "bob", "score": 3900}, {"board": "arena", "playerId": "cid", "score": 4200},
		{"board": "arena", "playerId": "dee", "score": 1500}} {
		s.submit(t, in)
	}
	r := s.do(t, "", `{
		top(board: "arena") { playerId rank tieRank score }
		rankForScore(board: "arena", score: 4200) { rank tieRank topPercent approximate size }
	}`, nil)
	want := `{"top":[{"playerId":"ann","rank":1,"tieRank":1,"score":4200},{"playerId":"cid","rank":2,"tieRank":1,"score":4200},` +
		`{"playerId":"bob","rank":3,"tieRank":3,"score":3900},{"playerId":"dee","rank":4,"tieRank":4,"score":1500}],` +
		`"rankForScore":{"rank":3,"tieRank":1,"topPercent":60,"approximate":false,"size":4}}`
	if len(r.Errors) > 0 || string(r.Data) != want {
		t.Fatalf("got %s %+v\nwant %s", r.Data, r.Errors, want)
	}
	r = s.do(t, testAdminKey, `mutation { createLeaderboard(input: {id: "arena-limited", maxSubmitsPerMinute: 30}) { id maxSubmitsPerMinute } }`, nil)
	if want := `{"createLeaderboard":{"id":"arena-limited","maxSubmitsPerMinute":30}}`; len(r.Errors) > 0 || string(r.Data) != want {
		t.Fatalf("got %s %+v, want %s", r.Data, r.Errors, want)
	}
}
