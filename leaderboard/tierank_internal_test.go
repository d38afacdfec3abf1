package leaderboard

import "testing"

// A submit reply carries tieRank as its 11th field; a result stored under an eventId by a version before tieRank
// (10 fields) reads back with its rank as tieRank, and an entry reply without one likewise.
func TestSubmitReplyTieRank(t *testing.T) {
	b := &Board{ID: "b", Order: Desc, Windows: []Window{AllTime}}
	row := []any{"dup", int64(3), int64(0), "-40", int64(1764450000), "", int64(2), "-30", int64(1), int64(5)}
	r, err := parseSubmitReply(b, row, AllPeriod, "p")
	if err != nil || r.Entry.Rank != 3 || r.Entry.TieRank != 3 || !r.Duplicate || r.Entry.Score != 40 {
		t.Fatalf("a 10-field reply: %+v %v", r, err)
	}
	r, err = parseSubmitReply(b, append(row, int64(2)), AllPeriod, "p")
	if err != nil || r.Entry.Rank != 3 || r.Entry.TieRank != 2 || *r.PreviousRank != 2 || *r.PreviousScore != 30 ||
		r.Size != 5 || r.Entry.TopPercent != 60 {
		t.Fatalf("an 11-field reply: %+v %v", r, err)
	}
	e, err := parseEntry(b, []any{"p", int64(4), int64(1), "-7", int64(1764450000), ""}, 8)
	if err != nil || e.TieRank != 4 || !e.Approximate || e.Score != 7 {
		t.Fatalf("an entry without tieRank: %+v %v", e, err)
	}
}
