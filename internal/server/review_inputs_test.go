package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scoreEvents' cursors and voidScoreEvents' inputs at their edges: a cursor past the last event answers an empty
// page without next; a malformed cursor or first out of range is BAD_USER_INPUT; a void of an empty id, of more
// than 1000 ids or with an over-long reason is BAD_USER_INPUT and changes nothing; a void of the create event
// ('#1'), of a removal's seq, of another board's eventId, or of a refused submission voids nothing (0); a void
// naming one submission by its eventId twice counts it once.
func TestLedgerReviewInputEdges(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	s.create(t, map[string]any{"id": "b", "mode": "SUM", "maxSubmitsPerMinute": 3}) // #1
	s.create(t, map[string]any{"id": "other"})
	s.submit(t, map[string]any{"board": "other", "playerId": "p", "score": 1, "eventId": "o1"})
	for i := range 3 { // #2 #3 #4
		s.submit(t, map[string]any{"board": "b", "playerId": "p", "score": float64(i + 1), "eventId": fmt.Sprintf("e%d", i)})
	}
	s.must(t, testAdminKey, `mutation { removePlayer(board: "b", playerId: "q") }`, nil, nil)         // #5
	s.wantCode(t, testSubmitKey, "RATE_LIMITED", submitMutation, map[string]any{"in": map[string]any{ // #6
		"board": "b", "playerId": "p", "score": 100, "eventId": "limited"}})
	clock.Set(ledgerStart.Add(time.Minute))

	all := s.allScoreEvents(t, "b", "p", 1)
	if len(all) != 4 || !all[3].Voided || all[3].VoidReason == nil || !strings.HasPrefix(*all[3].VoidReason, "refused (RATE_LIMITED)") {
		t.Fatalf("p's events:%s", renderEvents(all))
	}
	// The cursor of the last page's last event: an empty page.
	p := s.scoreEvents(t, "b", "p", 2, nil)
	p = s.scoreEvents(t, "b", "p", 2, p.Next)
	if len(p.Events) != 2 || p.Next != nil {
		t.Fatalf("the second page: %+v", p)
	}
	last := "6"
	if p := s.scoreEvents(t, "b", "p", 2, &last); len(p.Events) != 0 || p.Next != nil {
		t.Errorf("after the last event: %+v", p)
	}
	far := "9223372036854775807"
	if p := s.scoreEvents(t, "b", "p", 1000, &far); len(p.Events) != 0 || p.Next != nil {
		t.Errorf("after the largest cursor: %+v", p)
	}
	for _, after := range []string{"9223372036854775808", "1e3", " 1", "0x1", "-0", "abc", "\x00"} {
		r := s.do(t, testAdminKey, scoreEventsQuery, map[string]any{"b": "b", "p": "p", "n": 1, "after": after})
		if c := r.Codes(); len(c) != 1 || c[0] != "BAD_USER_INPUT" {
			// "-0" parses as 0: a cursor from the first; accepted is fine as long as it answers the first page.
			if after == "-0" && len(c) == 0 {
				continue
			}
			t.Errorf("after %q: %s %+v", after, r.Data, r.Errors)
		}
	}
	for _, first := range []any{-1, 0, 1001, "1", 1.5, 1 << 40} {
		r := s.do(t, testAdminKey, scoreEventsQuery, map[string]any{"b": "b", "p": "p", "n": first})
		if c := r.Codes(); len(c) != 1 || c[0] != "BAD_USER_INPUT" {
			t.Errorf("first %v: %s %+v", first, r.Data, r.Errors)
		}
	}

	total := func() float64 {
		var out struct{ Rank *entry }
		s.must(t, "", `{ rank(board: "b", playerId: "p") { score } }`, nil, &out)
		if out.Rank == nil {
			return -1
		}
		return out.Rank.Score
	}
	if got := total(); got != 6 {
		t.Fatalf("p's total: %v", got)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	for _, bad := range []map[string]any{
		{"b": "b", "ids": []string{""}, "r": "x"},
		{"b": "b", "ids": []string{"e0", ""}, "r": "x"},
		{"b": "b", "ids": many, "r": "x"},
		{"b": "b", "ids": []string{"e0"}, "r": strings.Repeat("r", 1025)},
		{"b": "b", "ids": []string{strings.Repeat("e", 129)}, "r": "x"},
		{"b": "b", "ids": nil, "r": "x"},
	} {
		r := s.do(t, testAdminKey, voidMutation, bad)
		if c := r.Codes(); len(c) != 1 || c[0] != "BAD_USER_INPUT" {
			t.Errorf("void %v: %s %+v", bad["ids"], r.Data, r.Errors)
		}
	}
	var n struct{ VoidScoreEvents int }
	for _, ids := range [][]string{{"#1"}, {"#5"}, {"#6"}, {"limited"}, {"o1"}, {"#0"}, {"#-2"}, {"#99999999999999999999"}} {
		s.must(t, testAdminKey, voidMutation, map[string]any{"b": "b", "ids": ids, "r": "x"}, &n)
		if n.VoidScoreEvents != 0 {
			t.Errorf("void %v: %d", ids, n.VoidScoreEvents)
		}
	}
	if got := total(); got != 6 {
		t.Fatalf("p's total after voids of nothing: %v", got)
	}
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "b", "ids": []string{"e1", "e1", "#3"}, "r": "twice"}, &n)
	if n.VoidScoreEvents != 1 {
		t.Errorf("void of e1 named twice and by its seq: %d", n.VoidScoreEvents)
	}
	if got := total(); got != 4 {
		t.Fatalf("p's total after the void of e1: %v", got)
	}
	if es := s.allScoreEvents(t, "other", "p", 5); len(es) != 1 || es[0].Voided {
		t.Errorf("the other board's event: %s", renderEvents(es))
	}
}
