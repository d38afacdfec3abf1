package server

import (
	"sync"
	"testing"
	"time"
)

// After Redis lost every board (a FLUSHALL), leaderboards answers UNAVAILABLE until they are restored, then the
// full list: not a list without the lost boards (it answered [] until the ledger check, or a request to each
// board, restored them). A board deleted a moment ago is simply not listed.
func TestLedgerBoardListAfterRedisLost(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour // only requests start restores
	s := startServer(t, cfg)
	for _, id := range []string{"a", "b", "c", "gone"} {
		s.create(t, map[string]any{"id": id})
		s.submit(t, map[string]any{"board": id, "playerId": "p", "score": 1})
	}
	s.must(t, "", `{ leaderboards { id } }`, nil, nil) // the ledger's list is read now, with "gone"
	var del struct{ DeleteLeaderboard bool }
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "gone"}, &del)
	before := s.do(t, "", `{ leaderboards { id } }`, nil)
	if len(before.Errors) > 0 || string(before.Data) != `{"leaderboards":[{"id":"a"},{"id":"b"},{"id":"c"}]}` {
		t.Fatalf("the list after a deletion: %s %+v", before.Data, before.Errors)
	}
	deletePrefixKeys(t, s)
	time.Sleep(1100 * time.Millisecond) // the lists' caches (1 s) are stale
	r := s.wantCode(t, "", "UNAVAILABLE", `{ leaderboards { id } }`, nil)
	t.Log(r.Errors)
	// A server started now, whose first requests come at once: those that come while the first read of the
	// ledger's list runs wait for it (before, they took the list of no read, Redis's alone: []).
	s2 := startServer(t, cfg)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s2.do(t, "", `{ leaderboards { id } }`, nil)
			if c := r.Codes(); (len(c) != 1 || c[0] != "UNAVAILABLE") && string(r.Data) != string(before.Data) {
				t.Errorf("a new server's first lists: %s %+v", r.Data, r.Errors)
			}
		}()
	}
	wg.Wait()
	for _, id := range []string{"a", "b", "c"} { // a request to each board starts its restore
		s.do(t, "", `query($b: ID!) { top(board: $b) { playerId } }`, map[string]any{"b": id})
	}
	if r := s.doAvailable(t, `{ leaderboards { id } }`, nil); string(r.Data) != string(before.Data) {
		t.Fatalf("the list once restored: %s, before %s", r.Data, before.Data)
	}
}
