package server

import (
	"fmt"
	"testing"
	"time"
)

// A void on a board with SEASON and ALL_TIME windows, of submissions in an ended season and in the running one
// (late scores with achievedAt inside the grace too, and a removal), leaves every season and ALL_TIME as a twin
// fed all but the voided submissions has them (ranking fields; a correction carries the names of its moment), also
// after Redis lost the board.
func TestLedgerVoidAcrossSeasonsMatchesATwin(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	s := startServer(t, cfg)
	const startSeason = `mutation($b: ID!, $id: String!, $e: Time!) { startSeason(board: $b, id: $id, endsAt: $e) { changed } }`
	boards := []string{"a", "twin"}
	for _, id := range boards {
		s.create(t, map[string]any{"id": id, "mode": "BEST", "windows": []string{"SEASON", "ALL_TIME"},
			"graceSeconds": 120, "closeEventTop": 10})
	}
	at := func(m int) time.Time { return ledgerStart.Add(time.Duration(m) * time.Minute) }
	voided := map[int]bool{2: true, 7: true, 11: true, 16: true, 19: true}
	var voidIDs []string
	submit := func(i int, achieved *time.Time) {
		in := map[string]any{"playerId": fmt.Sprintf("p%d", i%5), "score": float64((i * 3) % 7),
			"eventId": fmt.Sprintf("e%d", i), "displayName": fmt.Sprintf("N%d", i)}
		if achieved != nil {
			in["achievedAt"] = achieved.Format(time.RFC3339Nano)
		}
		for _, b := range boards {
			if b == "twin" && voided[i] {
				continue
			}
			in["board"] = b
			s.submit(t, in)
		}
		if voided[i] {
			voidIDs = append(voidIDs, in["eventId"].(string))
		}
	}
	for _, b := range boards {
		clock.Set(at(0))
		s.must(t, testAdminKey, startSeason, map[string]any{"b": b, "id": "s1", "e": at(30).Format(time.RFC3339)}, nil)
	}
	for i := range 10 {
		clock.Set(at(1 + i*2))
		submit(i, nil)
	}
	for _, b := range boards {
		clock.Set(at(25))
		s.must(t, testAdminKey, startSeason, map[string]any{"b": b, "id": "s2", "e": at(300).Format(time.RFC3339)}, nil)
	}
	// Late scores for s1 inside its grace (it ended at minute 25), then s2's own.
	for i := 10; i < 13; i++ {
		clock.Set(at(26))
		a := at(24)
		submit(i, &a)
	}
	for _, b := range boards {
		s.must(t, testAdminKey, `mutation($b: ID!) { removePlayer(board: $b, playerId: "p3") }`, map[string]any{"b": b}, nil)
	}
	for i := 13; i < 20; i++ {
		clock.Set(at(27 + i))
		submit(i, nil)
	}
	clock.Set(at(60)) // s1's grace is over: it closes and freezes
	waitUntil(t, 10*time.Second, "s1's close on both boards", func() bool {
		for _, b := range boards {
			evs, err := s.Store.Closes(ctxT(t, 5*time.Second), b, "0-0", 10)
			if err != nil || len(evs) != 1 {
				return false
			}
		}
		return true
	})
	query := `query($b: ID!) {
		s1: top(board: $b, window: SEASON, period: "s1", first: 50) { ` + entryFields + ` }
		s2: top(board: $b, window: SEASON, period: "s2", first: 50) { ` + entryFields + ` }
		all: top(board: $b, window: ALL_TIME, first: 50) { ` + entryFields + ` }
		r1: rank(board: $b, window: SEASON, period: "s1", playerId: "p1") { ` + entryFields + ` }
		leaderboard(id: $b) { s1: size(window: SEASON, period: "s1") s2: size(window: SEASON, period: "s2")
			periods(window: SEASON) { period size endedAt } } }`
	read := func(b string) string {
		t.Helper()
		return string(s.doAvailable(t, query, map[string]any{"b": b}).Data)
	}
	if read("a") == read("twin") {
		t.Fatal("the voids would change nothing")
	}
	clock.Set(at(61))
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": voidIDs, "r": "probe"}, &n)
	if n.VoidScoreEvents != len(voidIDs) {
		t.Fatalf("voided %d, want %d", n.VoidScoreEvents, len(voidIDs))
	}
	if got, want := read("a"), read("twin"); got != want {
		t.Fatalf("after the void:\n%s\nthe twin:\n%s", got, want)
	}
	deleteBoardKeys(t, s, "a")
	deleteBoardKeys(t, s, "twin")
	if got, want := unnamed(t, read("a")), unnamed(t, read("twin")); got != want {
		t.Fatalf("restored:\n%s\nthe twin:\n%s", got, want)
	}
}
