package server

import (
	"testing"
	"time"
)

// A void on a SUM board after which a later submission would pass 2^53: the rebuild refuses it, as a twin fed
// all but the voided submission refused it when it arrived; the board is readable and whole, and a restore gets
// the same.
func TestLedgerVoidMakesALaterTotalOutOfRange(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	for _, b := range []string{"a", "twin"} {
		s.create(t, map[string]any{"id": b, "mode": "SUM"})
	}
	const big = 9007199254740992 - 10 // 2^53 - 10
	steps := []struct {
		id    string
		score float64
	}{{"e1", big}, {"e2", -100}, {"e3", 50}, {"e4", 5}}
	for i, st := range steps {
		clock.Set(ledgerStart.Add(time.Duration(i) * time.Second))
		for _, b := range []string{"a", "twin"} {
			in := map[string]any{"board": b, "playerId": "p", "score": st.score, "eventId": st.id}
			switch {
			case b == "twin" && st.id == "e2":
			case b == "twin" && st.id == "e3":
				s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", submitMutation, map[string]any{"in": in})
			default:
				s.submit(t, in)
			}
		}
	}
	clock.Set(ledgerStart.Add(time.Minute))
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": []string{"e2"}, "r": "probe"}, &n)
	if n.VoidScoreEvents != 1 {
		t.Fatalf("voided %d", n.VoidScoreEvents)
	}
	read := func(b string) string {
		t.Helper()
		r := s.do(t, "", `query($b: ID!) { top(board: $b) { `+entryFields+` } }`, map[string]any{"b": b})
		if len(r.Errors) > 0 {
			t.Fatalf("top of %s: %+v", b, r.Errors)
		}
		return string(r.Data)
	}
	if got, want := read("a"), read("twin"); got != want {
		t.Errorf("after the void:\n%s\nthe twin:\n%s", got, want)
	}
	// scoreEvents still shows e3 counting (voided false): the rebuild's refusal is not marked, so that a later void
	// of e1 would let it count again, as it would on a twin.
	t.Logf("a's events:%s", renderEvents(s.allScoreEvents(t, "a", "p", 10)))
	deleteBoardKeys(t, s, "a")
	s.doAvailable(t, `{ top(board: "a") { playerId } }`, nil)
	if got, want := read("a"), read("twin"); got != want {
		t.Errorf("restored:\n%s\nthe twin:\n%s", got, want)
	}
}
