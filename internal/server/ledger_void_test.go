package server

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
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

// A void recorded while another restore holds the board (a ledger check's, a concurrent void's, another
// process's) waits for that restore and then rebuilds the board: it answers how many it voided, and the board
// answers without the voided events from then on. The call answered UNAVAILABLE at once instead, without
// extensions.outcome, which says nothing was applied (README, "Errors"), while the void was recorded (scoreEvents
// showed it voided, and a retry answered 0); concurrent voids of one board got that answer too.
func TestLedgerVoidWhileTheBoardIsHeld(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour // no ledger check rebuilds the board behind the test's back
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "held", "mode": "SUM"})
	s.submit(t, map[string]any{"board": "held", "playerId": "cheat", "score": 5, "eventId": "c1"})
	s.submit(t, map[string]any{"board": "held", "playerId": "cheat", "score": 1000, "eventId": "c2"})

	// Another process restores the board: it holds the board's restore lock (leaderboard/restore.go).
	rdb := redisClient(t, s)
	lock := leaderboard.RestoreLockKey(cfg.KeyPrefix, "held")
	if err := rdb.Set(ctxT(t, 5*time.Second), lock, "another process", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	answer := make(chan gqlResponse, 1)
	go func() {
		answer <- s.do(t, testAdminKey, voidMutation, map[string]any{"b": "held", "ids": []string{"c2"}, "r": "fraud"})
	}()
	// Once the ledger has the void, that other restore ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := s.scoreEvents(t, "held", "cheat", 10, nil).Events
		if len(evs) == 2 && evs[1].Voided {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the void of c2 is not recorded after 5 s:%s", renderEvents(evs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := rdb.Del(ctxT(t, 5*time.Second), lock).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-answer
	if len(r.Errors) > 0 {
		t.Fatalf("voidScoreEvents answered %+v while the ledger has c2 voided", r.Errors)
	}
	var n struct{ VoidScoreEvents int }
	if err := json.Unmarshal(r.Data, &n); err != nil || n.VoidScoreEvents != 1 {
		t.Fatalf("voidScoreEvents answered %s (%v), want 1", r.Data, err)
	}
	var out struct{ Rank *entry }
	s.must(t, "", `{ rank(board: "held", playerId: "cheat") { playerId score } }`, nil, &out)
	if out.Rank == nil || out.Rank.Score != 5 {
		t.Fatalf("cheat after the void of c2 answered: %+v, want score 5", out.Rank)
	}
}

// A board created before the ledger was on has no record (README, "Durability"): the ledger's admin fields answer
// BAD_USER_INPUT for it, as voidScoreEvents and the writes do, and change nothing. scoreEvents and
// rebuildLeaderboard answered NOT_FOUND ("no leaderboard with id") for a board that exists and is read.
func TestLedgerFieldsOnABoardFromBeforeTheLedger(t *testing.T) {
	t.Parallel()
	off := startServer(t, testConfig(t))
	off.create(t, map[string]any{"id": "old", "mode": "SUM"})
	off.submit(t, map[string]any{"board": "old", "playerId": "p", "score": 3, "eventId": "e1"})
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.RedisURL, cfg.KeyPrefix = off.App.cfg.RedisURL, off.App.cfg.KeyPrefix // the same Redis and board
	on := startServer(t, cfg)
	on.wantCode(t, testAdminKey, "BAD_USER_INPUT", scoreEventsQuery, map[string]any{"b": "old", "p": "p"})
	on.wantCode(t, testAdminKey, "BAD_USER_INPUT", voidMutation, map[string]any{"b": "old", "ids": []string{"e1"},
		"r": "fraud"})
	on.wantCode(t, testAdminKey, "BAD_USER_INPUT", rebuildMutation, map[string]any{"id": "old"})
	on.wantCode(t, testAdminKey, "NOT_FOUND", scoreEventsQuery, map[string]any{"b": "none", "p": "p"})
	on.wantCode(t, testAdminKey, "NOT_FOUND", rebuildMutation, map[string]any{"id": "none"})
	if got := on.top(t, "old", 10); len(got) != 1 || got[0].PlayerID != "p" || got[0].Score != 3 {
		t.Fatalf("the board after the refused calls: %+v, want p 3", got)
	}
}

// A void's reason with a NUL (valid UTF-8, and a String GraphQL takes) is BAD_USER_INPUT before the ledger: the
// ledger keeps reasons as text, which cannot hold a NUL. It reached PostgreSQL, failed the commit it shared with
// the board's other writes, and every write of that round answered INTERNAL, the void too.
func TestLedgerVoidReasonWithNUL(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "nul", "mode": "SUM"})
	s.submit(t, map[string]any{"board": "nul", "playerId": "a", "score": 1, "eventId": "x"})
	s.wantCode(t, testAdminKey, "BAD_USER_INPUT", voidMutation, map[string]any{"b": "nul", "ids": []string{"x"},
		"r": "a\x00b"})
	// Submissions to the board alongside such voids are not failed by them.
	var wg sync.WaitGroup
	errs := make([]gqlResponse, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%4 == 0 {
				s.do(t, testAdminKey, voidMutation, map[string]any{"b": "nul", "ids": []string{"x"}, "r": "\x00"})
				return
			}
			errs[i] = s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "nul",
				"playerId": fmt.Sprint("p", i), "score": 1}})
		}()
	}
	wg.Wait()
	for i, r := range errs {
		if len(r.Errors) > 0 {
			t.Errorf("submission %d beside voids with a NUL in the reason: %+v", i, r.Errors)
		}
	}
	if evs := s.scoreEvents(t, "nul", "a", 10, nil).Events; len(evs) != 1 || evs[0].Voided {
		t.Errorf("a's events after refused voids:%s", renderEvents(evs))
	}
}
