package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A submission the board refused changed nothing, its eventId included: a retry with it is a new attempt, on a
// ledgered server as on a server without the ledger (the oracle: the same requests to both, every answer and the
// board compared). It used to answer duplicate: true with the player's entry, saying the refused score counted;
// then, for a while, the refusal again, for ever (the eventId spent). scoreEvents lists every attempt.
func TestLedgerRetryOfARefusedSubmission(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	ledgered := startServer(t, ledgerConfig(t, clock))
	plainCfg := testConfig(t)
	plainCfg.Clock = clock.Now
	plain := startServer(t, plainCfg)
	type answer struct {
		code   string
		result scoreResult
	}
	send := func(s *testServer, in map[string]any) answer {
		t.Helper()
		r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": in})
		if len(r.Errors) > 0 {
			return answer{code: r.Errors[0].Code()}
		}
		var out struct{ SubmitScore scoreResult }
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatal(err)
		}
		return answer{result: out.SubmitScore}
	}
	first := map[string]any{"board": "r", "playerId": "p", "score": 5, "eventId": "e1"}
	limited := map[string]any{"board": "r", "playerId": "p", "score": 9, "eventId": "e2"}
	steps := []struct {
		at   time.Duration
		in   map[string]any
		want string // the code, or "" for an answer that counted ("dup": a duplicate)
	}{
		{0, first, ""},
		{0, limited, "RATE_LIMITED"},
		{10 * time.Second, limited, "RATE_LIMITED"}, // the same minute: refused again, as a new attempt
		{time.Minute, limited, ""},                  // the next minute: it counts
		{time.Minute, limited, "dup"},               // and is a duplicate from then on
	}
	for _, s := range []*testServer{ledgered, plain} {
		s.create(t, map[string]any{"id": "r", "maxSubmitsPerMinute": 1})
	}
	for i, st := range steps {
		clock.Set(ledgerStart.Add(st.at))
		got, want := send(ledgered, st.in), send(plain, st.in)
		if got.code != st.want && !(st.want == "dup" && got.code == "" && got.result.Duplicate) &&
			!(st.want == "" && got.code == "" && !got.result.Duplicate) {
			t.Fatalf("step %d (%v): the ledgered server answered %+v, want %q", i, st.in, got, st.want)
		}
		if got.code != want.code || got.result.Duplicate != want.result.Duplicate ||
			got.result.Updated != want.result.Updated || got.result.Entry.Score != want.result.Entry.Score ||
			got.result.Entry.Rank != want.result.Entry.Rank {
			t.Fatalf("step %d (%v): ledgered %+v, without the ledger %+v", i, st.in, got, want)
		}
	}
	if got, want := ledgered.top(t, "r", 10), plain.top(t, "r", 10); len(got) != 1 || got[0].Score != 9 ||
		fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the board: ledgered %+v, without the ledger %+v", got, want)
	}
	evs := ledgered.scoreEvents(t, "r", "p", 10, nil).Events
	var desc []string
	for _, e := range evs {
		reason := ""
		if e.VoidReason != nil {
			reason, _, _ = strings.Cut(*e.VoidReason, ":")
		}
		desc = append(desc, fmt.Sprintf("%s %v %v %s", e.EventID, e.Score, e.Voided, reason))
	}
	if got, want := strings.Join(desc, ", "), "e1 5 false , e2 9 true refused (RATE_LIMITED), "+
		"e2 9 true refused (RATE_LIMITED), e2 9 false "; got != want {
		t.Errorf("scoreEvents: %s\nwant %s", got, want)
	}
	// The index rebuilt from the ledger counts the attempt that counted, once.
	var rb struct{ RebuildLeaderboard bool }
	ledgered.must(t, testAdminKey, rebuildMutation, map[string]any{"id": "r"}, &rb)
	if top := ledgered.top(t, "r", 10); len(top) != 1 || top[0].Score != 9 {
		t.Errorf("the board rebuilt: %+v", top)
	}
	if a := send(ledgered, limited); a.code != "" || !a.result.Duplicate || a.result.Entry.Score != 9 {
		t.Errorf("a retry after the rebuild: %+v", a)
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
