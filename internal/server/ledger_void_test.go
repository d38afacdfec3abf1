package server

import (
	"testing"
	"time"
)

// A void that voids nothing (ids the board never had, or voided already: it answers 0) owes the board no rebuild:
// it must not leave the board marked, or the next ledger check rebuilds the whole board from the ledger — every
// event applied again, the board UNAVAILABLE meanwhile — for a call that changed nothing. mark.lua marked the
// board for every void the gate passed, whatever it voided.
func TestLedgerVoidOfNothingRebuildsNothing(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour // the test runs the ledger check itself
	s := startServer(t, cfg)
	for _, b := range []map[string]any{{"id": "one", "mode": "SUM"}, {"id": "three", "mode": "SUM", "shards": 3}} {
		board := b["id"].(string)
		s.create(t, b)
		s.submit(t, map[string]any{"board": board, "playerId": "cheat", "score": 5, "eventId": "c1"})
		s.submit(t, map[string]any{"board": board, "playerId": "cheat", "score": 1000, "eventId": "c2"})
		s.submit(t, map[string]any{"board": board, "playerId": "fair", "score": 50, "eventId": "f1"})
		var n struct{ VoidScoreEvents int }
		s.must(t, testAdminKey, voidMutation, map[string]any{"b": board, "ids": []string{"c2"}, "r": "fraud"}, &n)
		if n.VoidScoreEvents != 1 {
			t.Fatalf("%s: the void of c2 voided %d, want 1", board, n.VoidScoreEvents)
		}
		for _, ids := range [][]string{{"c2"}, {"never-sent"}, {"#99"}} {
			s.must(t, testAdminKey, voidMutation, map[string]any{"b": board, "ids": ids, "r": "again"}, &n)
			if n.VoidScoreEvents != 0 {
				t.Fatalf("%s: the void of %v voided %d, want 0", board, ids, n.VoidScoreEvents)
			}
		}
		// Oracle: cheat 5 (c2 voided), fair 50.
		got := s.top(t, board, 10)
		if len(got) != 2 || got[0].PlayerID != "fair" || got[0].Score != 50 || got[1].PlayerID != "cheat" ||
			got[1].Score != 5 {
			t.Fatalf("%s: top after the voids: %+v, want fair 50, cheat 5", board, got)
		}
	}
	n, err := s.App.Store.CheckLedger(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the ledger check after voids of nothing started %d restores, want 0 (every board is whole)", n)
	}
}
