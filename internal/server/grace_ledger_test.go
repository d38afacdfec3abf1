package server

import (
	"fmt"
	"testing"
	"time"
)

// The grace edge with the ledger, on boards of one shard and of three: a late score a millisecond before end +
// grace counts for the day; at end + grace exactly and a millisecond after it is PERIOD_CLOSED and nothing of it
// is written: no ALL_TIME score, no event in the ledger (scoreEvents), and the eventId is free.
func TestGraceEdgeWithLedger(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			day := time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC)
			end := day.Add(24 * time.Hour)
			clock := &closeClock{t: day.Add(time.Hour)}
			cfg := ledgerConfig(t, clock)
			cfg.Closes.CheckInterval = time.Hour // no close check: the edge is the submissions' own
			s := startServer(t, cfg)
			s.create(t, map[string]any{"id": "edge", "windows": []string{"DAILY", "ALL_TIME"}, "shards": shards,
				"graceSeconds": 60})
			s.submit(t, map[string]any{"board": "edge", "playerId": "early", "score": 1})
			late := func(p string) gqlResponse {
				return s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "edge",
					"playerId": p, "score": 5, "eventId": "ev-" + p, "achievedAt": end.Add(-time.Second).Format(time.RFC3339)}})
			}
			clock.Set(end.Add(time.Minute - time.Millisecond))
			if r := late("before"); len(r.Errors) != 0 {
				t.Fatalf("a millisecond before end + grace: %+v", r.Errors)
			}
			for _, c := range []struct {
				p  string
				at time.Duration
			}{{"at", 0}, {"after", time.Millisecond}} {
				clock.Set(end.Add(time.Minute + c.at))
				if r := late(c.p); len(r.Errors) != 1 || r.Errors[0].Code() != "PERIOD_CLOSED" {
					t.Fatalf("%s end + grace: %+v", c.p, r.Errors)
				}
				if evs := s.scoreEvents(t, "edge", c.p, 10, nil); len(evs.Events) != 0 {
					t.Fatalf("%s end + grace: the ledger records %s", c.p, renderEvents(evs.Events))
				}
			}
			var out struct {
				Leaderboard struct{ All, Day int }
				Rank        *entry
			}
			s.must(t, "", `{ leaderboard(id: "edge") { all: size(window: ALL_TIME) day: size(window: DAILY, period: "2031-03-14") }
				rank(board: "edge", window: ALL_TIME, playerId: "at") { rank } }`, nil, &out)
			if out.Leaderboard.All != 2 || out.Leaderboard.Day != 2 || out.Rank != nil {
				t.Fatalf("after the edge: %+v", out)
			}
		})
	}
}
