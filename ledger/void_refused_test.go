package ledger_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A void that takes away what let a later submission count: on a SUM board of scores up to 10, ann sends +8, -5
// and +6 (total 9); voiding the -5 leaves +8 and +6, a total of 14, out of range, so the rebuild refuses the +6.
// scoreEvents must say so (the +6 no longer counts: voided, the refusal its reason), where it listed the +6 as
// counting; the board holds 8; and a retry of the +6 is a new attempt, refused again while the total would leave
// the range. A submission of a day whose keys expired since is refused by a restore too (nothing to write it to),
// and is no such refusal: it counted, and still counts. Unsharded and sharded.
func TestVoidThatRefusesALaterSubmission(t *testing.T) {
	pg := pgtest.Shared(t)
	rdb := redistest.Standalone(t).Client(t)
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			c := newClock()
			s := newStore(rdb, openLedger(t, pg.Database(t)), c)
			board := fmt.Sprintf("vr%d", shards)
			maxScore := 10.0
			if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: board, Mode: leaderboard.Sum, MaxScore: &maxScore,
				Windows: []leaderboard.Window{leaderboard.Daily}, Shards: shards}); err != nil {
				t.Fatal(err)
			}
			submit := func(p string, v float64, id string) error {
				_, err := s.Submit(ctx, leaderboard.Submission{Board: board, Player: p, Score: v, EventID: id})
				return err
			}
			// bob's score is of a day whose keys expire long before the void (the board's only window is DAILY).
			if err := submit("bob", 3, "b1"); err != nil {
				t.Fatal(err)
			}
			c.advance(60 * 24 * time.Hour)
			for _, sub := range []struct {
				v  float64
				id string
			}{{8, "e1"}, {-5, "e2"}, {6, "e3"}} {
				if err := submit("ann", sub.v, sub.id); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := s.VoidScoreEvents(ctx, board, []string{"e2"}, "fraud"); err != nil || n != 1 {
				t.Fatalf("void: %d, %v", n, err)
			}
			today := leaderboard.View{Board: board, Window: leaderboard.Daily}
			if en, err := s.Rank(ctx, today, "ann"); err != nil || en == nil || en.Score != 8 {
				t.Fatalf("ann after the void: %+v, %v; want 8 (+8; -5 voided, +6 refused)", en, err)
			}
			want := map[string]string{"e1": "", "e2": "fraud", "e3": "refused (BAD_USER_INPUT): "}
			evs, _, err := s.ScoreEvents(ctx, board, "ann", 10, "")
			if err != nil || len(evs) != 3 {
				t.Fatalf("ann's events: %+v, %v", evs, err)
			}
			for _, e := range evs {
				if w := want[e.EventID]; e.Voided != (w != "") || !strings.HasPrefix(e.VoidReason, w) {
					t.Errorf("event %s: voided %v (%q); want voided %v (%q...)", e.EventID, e.Voided, e.VoidReason,
						w != "", w)
				}
			}
			bobs, _, err := s.ScoreEvents(ctx, board, "bob", 10, "")
			if err != nil || len(bobs) != 1 || bobs[0].Voided {
				t.Fatalf("bob's event of an expired day: %+v, %v; want counting", bobs, err)
			}
			if err := submit("ann", 6, "e3"); leaderboard.ErrorCode(err) != leaderboard.Invalid {
				t.Fatalf("a retry of e3 after the void: %v; want BAD_USER_INPUT (8 + 6 > 10)", err)
			}
		})
	}
}
