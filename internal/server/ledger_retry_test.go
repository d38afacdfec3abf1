package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A retry (same eventId, same submission) of a submission the board refused answers that refusal again: it never
// counted, and duplicate true would say it did; the board does not change.
func TestLedgerRetryOfARefusedSubmission(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	s.create(t, map[string]any{"id": "r", "maxSubmitsPerMinute": 1})
	s.submit(t, map[string]any{"board": "r", "playerId": "p", "score": 5, "eventId": "e1"})
	// Past the submission limit: refused, recorded, voided with the refusal.
	limited := map[string]any{"board": "r", "playerId": "p", "score": 9, "eventId": "e2"}
	s.wantCode(t, testSubmitKey, "RATE_LIMITED", submitMutation, map[string]any{"in": limited})
	// The next minute, the same submission again.
	clock.Set(ledgerStart.Add(time.Minute))
	r := s.wantCode(t, testSubmitKey, "RATE_LIMITED", submitMutation, map[string]any{"in": limited})
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Message, "eventId e2 was refused when first sent") {
		t.Errorf("the retry of a refused submission: %+v", r.Errors)
	}
	if top := s.top(t, "r", 10); len(top) != 1 || top[0].Score != 5 {
		t.Errorf("the board after the retry of a refused submission: %+v", top)
	}
}

// A retry of a submission that counted answers duplicate, also when its player has no score now (removed since)
// and Redis's dedupe record went with a rebuild: the submission as sent, unranked. It was an error ("the
// marshaler returned null" for updatedAt, coded BAD_USER_INPUT).
func TestLedgerRetryOfARemovedPlayersSubmission(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			s := startServer(t, ledgerConfig(t, clock))
			s.create(t, map[string]any{"id": "r", "shards": shards})
			sub := map[string]any{"board": "r", "playerId": "p", "score": 5, "eventId": "e1"}
			s.submit(t, sub)
			s.must(t, testAdminKey, `mutation { removePlayer(board: "r", playerId: "p") }`, nil, nil)
			var rb struct{ RebuildLeaderboard bool }
			s.must(t, testAdminKey, rebuildMutation, map[string]any{"id": "r"}, &rb)
			clock.Set(ledgerStart.Add(2 * time.Minute))
			var out struct{ SubmitScore scoreResult }
			s.must(t, testSubmitKey, submitMutation, map[string]any{"in": sub}, &out)
			if e := out.SubmitScore.Entry; !out.SubmitScore.Duplicate || e.PlayerID != "p" || e.Rank != 0 ||
				e.Score != 5 || e.UpdatedAt.IsZero() {
				t.Errorf("the retry of e1 after p's removal and a rebuild: %+v", out.SubmitScore)
			}
			if top := s.top(t, "r", 10); len(top) != 0 {
				t.Errorf("the board after the retry: %+v", top)
			}
		})
	}
}

// The same submission twice in one submitScores call (same eventId), the first refused: the second is refused
// too, not a duplicate of something that counts.
func TestLedgerRefusedTwiceInOneCall(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	s.create(t, map[string]any{"id": "r", "maxSubmitsPerMinute": 1})
	s.submit(t, map[string]any{"board": "r", "playerId": "p", "score": 5, "eventId": "e1"})
	limited := map[string]any{"board": "r", "playerId": "p", "score": 9, "eventId": "e2"}
	r := s.do(t, testSubmitKey, submitsMutation, map[string]any{"in": []map[string]any{limited, limited}})
	if c := r.Codes(); len(c) != 2 || c[0] != "RATE_LIMITED" || c[1] != "RATE_LIMITED" {
		t.Errorf("a refused submission twice in one call: %s %+v", r.Data, r.Errors)
	}
}
