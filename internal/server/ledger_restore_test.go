package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// A submission the ledger records while its board is being restored is applied by that restore (it takes every
// event recorded until it switches the board in), so its UNAVAILABLE must leave the outcome open
// (extensions.outcome UNKNOWN: retry only with the same eventId). It said nothing was applied (no outcome), and a
// client that retried a SUM delta without an eventId, as the README allows then, counted it twice. A board's
// definition cached before the board was lost (another server's cache, or a rebuild starting between a
// submission's check and its apply) lets a submission reach the ledger while the board is restored.
func TestLedgerSubmitRecordedDuringRestore(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour // the test starts the restore itself
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "lost", "mode": "SUM"})
	s.submit(t, map[string]any{"board": "lost", "playerId": "p", "score": 10}) // the server caches the definition

	// Redis loses the board, and another process restores it (it holds the board's restore lock).
	deleteBoardKeys(t, s, "lost")
	rdb := redisClient(t, s)
	lock := leaderboard.RestoreLockKey(cfg.KeyPrefix, "lost")
	if err := rdb.Set(ctxT(t, 5*time.Second), lock, "another process", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "lost", "playerId": "p",
		"score": 1}})
	recorded := len(s.scoreEvents(t, "lost", "p", 10, nil).Events) == 2
	if err := rdb.Del(ctxT(t, 5*time.Second), lock).Err(); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(r.Errors) == 0:
		t.Logf("the submission during the restore answered %s", r.Data)
	case !recorded:
		t.Logf("the submission during the restore was refused before the ledger: %+v", r.Errors)
	case r.Errors[0].Code() != "UNAVAILABLE" || r.Errors[0].Extensions["outcome"] != "UNKNOWN":
		t.Errorf("the submission the ledger recorded during the restore answered %+v, want UNAVAILABLE with "+
			"outcome UNKNOWN: the restore applies it", r.Errors)
	}
	// The oracle: the restored board holds every recorded event.
	want := 10.0
	if recorded {
		want = 11
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out struct{ Rank *entry }
		rr := s.do(t, "", `{ rank(board: "lost", playerId: "p") { playerId score } }`, nil)
		if len(rr.Errors) == 0 {
			if err := json.Unmarshal(rr.Data, &out); err != nil {
				t.Fatal(err)
			}
			if out.Rank == nil || out.Rank.Score != want {
				t.Fatalf("p on the restored board: %+v, want score %v", out.Rank, want)
			}
			return
		}
		if rr.Errors[0].Code() != "UNAVAILABLE" || time.Now().After(deadline) {
			t.Fatalf("rank while the board is restored: %+v", rr.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteLeaderboard while the board is being rebuilt: either the deletion is refused (nothing recorded, the board
// stays) or the board is gone for good; never a deleted board back in Redis. The restore read the board's events
// before the deletion, the deletion was recorded and found no definition to delete (it waits aside during a
// restore: the call answered false), and the restore then switched the board in: a board the ledger has deleted,
// readable, whose every write is refused as "created before the ledger", and which no ledger check removes.
func TestLedgerDeleteDuringRebuild(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour
	cfg.LedgerRestoreRate = 2000 // 3,000 events: a rebuild of about 1.5 s
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "d", "mode": "SUM"})
	for range 30 {
		in := make([]map[string]any, 100)
		for j := range in {
			in[j] = map[string]any{"board": "d", "playerId": fmt.Sprint("p", j), "score": 1}
		}
		s.must(t, testSubmitKey, submitsMutation, map[string]any{"in": in}, nil)
	}
	// A top list read before the rebuild: the live hub keeps it cached (and the top cache its bytes), which the
	// rebuild must not let them serve.
	if r := s.do(t, "", `{ top(board: "d", first: 1) { playerId } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("top before the rebuild: %+v", r.Errors)
	}
	// The rebuild runs: the board answers UNAVAILABLE. On a loaded machine the first read may come only after a
	// rebuild is over: then the board is rebuilt again (three times at most), and every rebuild's answer is shown.
	var rebuilt chan gqlResponse
	var missed []gqlResponse
	for seen := false; !seen; {
		if len(missed) == 3 {
			t.Fatalf("the board never answered UNAVAILABLE during its rebuilds; their answers: %+v", missed)
		}
		rebuilt = make(chan gqlResponse, 1)
		go func() { rebuilt <- s.do(t, testAdminKey, rebuildMutation, map[string]any{"id": "d"}) }()
		for deadline := time.Now().Add(10 * time.Second); !seen; time.Sleep(5 * time.Millisecond) {
			r := s.do(t, "", `{ top(board: "d", first: 1) { playerId } }`, nil)
			if len(r.Errors) > 0 && r.Errors[0].Code() == "UNAVAILABLE" {
				seen = true
				break
			}
			select {
			case over := <-rebuilt:
				missed = append(missed, over)
			default:
				if time.Now().After(deadline) {
					t.Fatalf("the board never answered UNAVAILABLE during its rebuild: %s %+v", r.Data, r.Errors)
				}
				continue
			}
			break
		}
	}
	del := s.do(t, testAdminKey, `mutation { deleteLeaderboard(id: "d") }`, nil)
	if r := <-rebuilt; len(r.Errors) > 0 && r.Errors[0].Code() != "NOT_FOUND" {
		t.Errorf("rebuildLeaderboard: %+v", r.Errors)
	}
	recorded := slices.Contains(ledgerKinds(t, ledgerPool(t, cfg.DatabaseURL), "d"), leaderboard.EventDelete) ||
		len(ledgerKinds(t, ledgerPool(t, cfg.DatabaseURL), "d")) == 0 // the live board of that id is gone
	var out struct{ Leaderboard *struct{ ID string } }
	s.must(t, "", `{ leaderboard(id: "d") { id } }`, nil, &out)
	switch {
	case recorded && out.Leaderboard != nil:
		t.Fatalf("deleteLeaderboard during the rebuild answered %s %+v; the ledger deleted the board, but after "+
			"the rebuild Redis has it again", del.Data, del.Errors)
	case !recorded && out.Leaderboard == nil:
		t.Fatalf("deleteLeaderboard answered %s %+v; the ledger holds the board, Redis does not", del.Data, del.Errors)
	case !recorded && (len(del.Errors) == 0 || del.Errors[0].Code() != "UNAVAILABLE"):
		t.Fatalf("a deletion the ledger did not record answered %s %+v", del.Data, del.Errors)
	}
}
