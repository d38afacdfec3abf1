package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// On an exactTop board (a tail of estimated ranks), a void leaves the board as a twin fed all but the voided
// submissions has it — the exact tier and every tail player's estimated rank, tieRank and topPercent — and a
// restore after Redis lost the board reproduces it.
func TestLedgerVoidExactTopMatchesATwin(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	boards := []string{"a", "twin"}
	for _, id := range boards {
		s.create(t, map[string]any{"id": id, "mode": "SUM", "exactTop": 5})
	}
	var voidIDs []string
	for i := range 80 {
		clock.Set(ledgerStart.Add(time.Duration(i) * time.Second))
		in := map[string]any{"playerId": fmt.Sprintf("p%02d", i%25), "score": float64((i*13)%50) + 0.5,
			"eventId": fmt.Sprintf("e%d", i)}
		v := i%9 == 4
		for _, b := range boards {
			if b == "twin" && v {
				continue
			}
			in["board"] = b
			s.submit(t, in)
		}
		if v {
			voidIDs = append(voidIDs, in["eventId"].(string))
		}
	}
	var players []string
	for i := range 25 {
		players = append(players, fmt.Sprintf("%q", fmt.Sprintf("p%02d", i)))
	}
	query := `query($b: ID!) { top(board: $b, first: 50) { ` + entryFields + ` }
		friends(board: $b, playerId: "p00", friendIds: [` + strings.Join(players, ",") + `]) { ` + entryFields + ` }
		aroundMe(board: $b, playerId: "p17", radius: 2) { ` + entryFields + ` }
		leaderboard(id: $b) { size } }`
	read := func(b string) string {
		t.Helper()
		return string(s.doAvailable(t, query, map[string]any{"b": b}).Data)
	}
	if !strings.Contains(read("twin"), `"approximate":true`) {
		t.Fatalf("no tail: %s", read("twin"))
	}
	if read("a") == read("twin") {
		t.Fatal("the voids would change nothing")
	}
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": voidIDs, "r": "probe"}, &n)
	if got, want := read("a"), read("twin"); got != want {
		t.Fatalf("after the void:\n%s\nthe twin:\n%s", got, want)
	}
	want := read("twin")
	deleteBoardKeys(t, s, "a")
	if got := read("a"); got != want {
		t.Fatalf("restored:\n%s\nthe twin:\n%s", got, want)
	}
}
