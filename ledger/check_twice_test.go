package ledger_test

import (
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A board the ledger holds and Redis has no definition of is lost, or being created this very moment (recorded,
// not applied yet: a restore then answered its creator UNAVAILABLE). The ledger check restores it only when a
// second check in a row finds it so: the first leaves Redis untouched (no restore lock, no definition waiting
// aside), the second restores it whole.
func TestLedgerCheckRestoresAnUndefinedBoardAtTheSecondLook(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pgtest.Shared(t).Database(t))
	s := newStore(rdb, l, newClock())
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "new"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, leaderboard.Submission{Board: "new", Player: "p", Score: 3}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil { // as a board whose creation Redis has not applied yet
		t.Fatal(err)
	}
	if n, err := s.CheckLedger(ctx); err != nil || n != 1 {
		t.Fatalf("first check: %d boards found, %v; want 1", n, err)
	}
	if keys, err := rdb.Keys(ctx, "*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("after the first check Redis holds %q (%v); want nothing: no restore yet", keys, err)
	}
	if n, err := s.CheckLedger(ctx); err != nil || n != 1 {
		t.Fatalf("second check: %d boards found, %v; want 1", n, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e, err := s.Rank(ctx, leaderboard.View{Board: "new"}, "p")
		if err == nil && e != nil && e.Score == 3 && e.Rank == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restored after the second check: %+v %v", e, err)
		}
	}
}
