package pubsub

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A row's tieRank can change while its rank does not: A, C and B reach 90 in that order (ranks 1, 2, 3, all
// tieRank 1); when A climbs to 100, C and B keep ranks 2 and 3 but their tieRank becomes 2. The live top list's
// next diff carries both rows, and B's rank subscription gets an update although B's rank did not move.
func TestTieRankChangesAreSent(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "tie", Mode: leaderboard.Latest})
	ctx := t.Context()
	v := leaderboard.View{Board: "tie"}
	for _, p := range []string{"A", "C", "B"} {
		submit(t, st, "tie", p, 90)
	}
	submit(t, st, "tie", "D", 10)
	top, err := h.SubscribeTop(ctx, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	rank, err := h.SubscribeRank(ctx, v, "B")
	if err != nil {
		t.Fatal(err)
	}
	next := func() *TopUpdate {
		t.Helper()
		select {
		case u := <-top:
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no top update")
		}
		return nil
	}
	snap := next()
	if got := fullRows(snap.Entries, snap.Size); !slices.Equal(got, []string{
		"A rank=1 tie=1 score=90 approx=false name=\"<none>\" meta= at=" + at(snap.Entries[0]) + " pct=25.000000",
		"C rank=2 tie=1 score=90 approx=false name=\"<none>\" meta= at=" + at(snap.Entries[1]) + " pct=50.000000",
		"B rank=3 tie=1 score=90 approx=false name=\"<none>\" meta= at=" + at(snap.Entries[2]) + " pct=75.000000",
		"D rank=4 tie=4 score=10 approx=false name=\"<none>\" meta= at=" + at(snap.Entries[3]) + " pct=100.000000",
	}) {
		t.Fatalf("snapshot: %v", got)
	}
	if e := nextEntry(t, rank, 5*time.Second); e.Rank != 3 || e.TieRank != 1 {
		t.Fatalf("B's first entry: %+v", e)
	}

	// A change of D alone, and its diff: the hub's first full re-reads (after the channel subscription is
	// confirmed) are behind us, so what follows is read because of A's change event alone.
	submit(t, st, "tie", "D", 11)
	if u := next(); len(u.Entries) != 1 || u.Entries[0].PlayerID != "D" {
		t.Fatalf("diff after D's change: %+v", u)
	}

	submit(t, st, "tie", "A", 100)
	u := next()
	changed := map[string]leaderboard.Entry{}
	for _, e := range u.Entries {
		changed[e.PlayerID] = e
	}
	if u.Snapshot || changed["C"].TieRank != 2 || changed["C"].Rank != 2 || changed["B"].TieRank != 2 ||
		changed["B"].Rank != 3 {
		t.Fatalf("diff after A climbed: %+v", u)
	}
	if _, ok := changed["D"]; ok {
		t.Fatalf("D did not change, yet it is in the diff: %+v", u)
	}
	if e := nextEntry(t, rank, 5*time.Second); e.Rank != 3 || e.TieRank != 2 || e.Score != 90 {
		t.Fatalf("B's entry after A climbed: %+v, want rank 3 tieRank 2", e)
	}
}

func at(e leaderboard.Entry) string { return strconv.FormatInt(e.UpdatedAt.Unix(), 10) }
