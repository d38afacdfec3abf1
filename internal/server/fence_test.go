package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// README ("Closed is final"), over GraphQL: once the close checker has recorded a day's close, a server whose
// clock lags (here the same server, its clock set back inside the grace) still refuses a late score for it:
// submitScore is PERIOD_CLOSED (HTTP 200, extensions.code), in submitScores that item alone; removePlayer takes
// the player out of ALL_TIME and leaves the closed day as it is, and is PERIOD_CLOSED once the closed day holds
// the player's only score. The day's standings stay what its close event announced.
func TestClosedPeriodIsFinalOverGraphQL(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 5, 20, 10, 0, 0, 0, time.UTC)}
	s := startServer(t, closeTestConfig(t, clock))
	s.create(t, map[string]any{"id": "final", "windows": []string{"ALL_TIME", "DAILY"}, "graceSeconds": 60})
	s.submit(t, map[string]any{"board": "final", "playerId": "ann", "score": 10})
	clock.Set(time.Date(2031, 5, 21, 0, 1, 0, 0, time.UTC)) // the 20th closes
	waitUntil(t, 10*time.Second, "the close of the 20th", func() bool {
		id, err := s.Store.LastCloseID(context.Background(), "final")
		if err != nil {
			t.Fatal(err)
		}
		return id != "0-0"
	})
	clock.Set(time.Date(2031, 5, 21, 0, 0, 59, 0, time.UTC)) // a lagging clock: inside the grace by it
	late := map[string]any{"board": "final", "playerId": "bob", "score": 20, "achievedAt": "2031-05-20T23:59:00Z"}
	r := s.wantCode(t, testSubmitKey, "PERIOD_CLOSED", submitMutation, map[string]any{"in": late})
	if r.Status != http.StatusOK || !strings.Contains(r.Errors[0].Message, "2031-05-20") {
		t.Fatalf("late score: status %d, errors %+v", r.Status, r.Errors)
	}
	bulk := s.do(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId } } }`,
		map[string]any{"in": []any{late, map[string]any{"board": "final", "playerId": "cid", "score": 5}}})
	if bulk.Status != http.StatusOK || len(bulk.Errors) != 1 || bulk.Errors[0].Code() != "PERIOD_CLOSED" ||
		!strings.Contains(string(bulk.Data), `null,{"entry":{"playerId":"cid"}}`) {
		t.Fatalf("bulk: status %d data %s errors %+v", bulk.Status, bulk.Data, bulk.Errors)
	}
	const remove = `mutation { removePlayer(board: "final", playerId: "ann") }`
	var removed struct{ RemovePlayer bool }
	s.must(t, testAdminKey, remove, nil, &removed)
	if !removed.RemovePlayer {
		t.Fatal("removePlayer: false, want true (ann had a score in ALL_TIME)")
	}
	s.wantCode(t, testAdminKey, "PERIOD_CLOSED", remove, nil)
	if got := ids(s.top(t, "final", 10)); got != "cid:1" {
		t.Fatalf("ALL_TIME %q, want cid:1", got)
	}
	var day struct{ Top []entry }
	s.must(t, "", `{ top(board: "final", window: DAILY, period: "2031-05-20") { `+entryFields+` } }`, nil, &day)
	if got := ids(day.Top); got != "ann:1" {
		t.Fatalf("the closed 20th %q, want ann:1 as its close event announced", got)
	}
}
