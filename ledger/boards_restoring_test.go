package ledger_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The server's own passes over the boards (close checks, webhooks: Store.Boards) leave out a board being restored
// instead of failing for all of them: a board Redis lost answered UNAVAILABLE in the list, and no period of any
// board closed and no webhook went out until its restore was done (a board of a million events: 40 s). The
// clients' list (ListBoards, leaderboards) still answers UNAVAILABLE then, never a list without the board.
func TestBoardsWhileOneIsRestored(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := newHeldLedger(openLedger(t, pg.Database(t)))
	s := newStore(rdb, l, newClock())
	for _, id := range []string{"kept", "lost"} {
		if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Submit(ctx, leaderboard.Submission{Board: id, Player: "p", Score: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(bs []*leaderboard.Board) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.ID)
		}
		return out
	}
	if bs, err := s.Boards(ctx); err != nil || !slices.Equal(ids(bs), []string{"kept", "lost"}) {
		t.Fatalf("Boards before: %v, %v", ids(bs), err)
	}
	lost, err := s.Board(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	l.arm(false)
	dropKeys(ctx, t, rdb, s.ShardKeyBases(lost)[0])
	if _, err := s.Top(ctx, leaderboard.View{Board: "lost"}, 0, 10); leaderboard.ErrorCode(err) != leaderboard.Unavailable {
		t.Fatalf("a read of the lost board: %v, want UNAVAILABLE", err)
	}
	select {
	case <-l.entered: // the restore holds its lock and waits
	case <-ctx.Done():
		t.Fatal("no restore started")
	}
	time.Sleep(1100 * time.Millisecond) // past the board list's cache (boardListTTL): Redis's list is read again
	bs, err := s.Boards(ctx)
	if err != nil || !slices.Equal(ids(bs), []string{"kept"}) {
		t.Errorf("Boards while lost is restored: %v, %v; want [kept]", ids(bs), err)
	}
	if bs, err := s.ListBoards(ctx); leaderboard.ErrorCode(err) != leaderboard.Unavailable {
		t.Errorf("ListBoards while lost is restored: %v, %v; want UNAVAILABLE", ids(bs), err)
	}
	close(l.release)
	for {
		if _, err := s.Board(ctx, "lost"); err == nil {
			break
		} else if leaderboard.ErrorCode(err) != leaderboard.Unavailable || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Listed again once the list is read again (within boardListTTL).
	for {
		bs, err := s.Boards(ctx)
		if err == nil && slices.Equal(ids(bs), []string{"kept", "lost"}) {
			break
		}
		if err != nil || ctx.Err() != nil {
			t.Fatalf("Boards after the restore: %v, %v", ids(bs), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
