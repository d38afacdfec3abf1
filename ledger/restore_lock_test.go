package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// heldLedger is a ledger whose next Board call (holdBoard) or next Events call (holdEvents), once armed, waits
// for release before it reads and returns (a slow database).
type heldLedger struct {
	leaderboard.Ledger
	mu                    sync.Mutex
	holdBoard, holdEvents bool
	entered, release      chan struct{}
}

func newHeldLedger(l leaderboard.Ledger) *heldLedger {
	return &heldLedger{Ledger: l, entered: make(chan struct{}), release: make(chan struct{})}
}

// arm holds the next Board call (board) or the next Events call.
func (l *heldLedger) arm(board bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if board {
		l.holdBoard = true
	} else {
		l.holdEvents = true
	}
}

// wait holds the call when *armed (and disarms it).
func (l *heldLedger) wait(armed *bool) {
	l.mu.Lock()
	held := *armed
	*armed = false
	l.mu.Unlock()
	if held {
		close(l.entered)
		<-l.release
	}
}

func (l *heldLedger) Board(ctx context.Context, id string) (leaderboard.LedgerBoard, bool, error) {
	l.wait(&l.holdBoard)
	return l.Ledger.Board(ctx, id)
}

func (l *heldLedger) Events(ctx context.Context, key, after int64, limit int) ([]leaderboard.LedgerEvent, error) {
	l.wait(&l.holdEvents)
	return l.Ledger.Events(ctx, key, after, limit)
}

// A rebuild whose read of the ledger's board is slow, while the board is deleted and created again (with other
// players): the rebuild must not switch the deleted board back in. It read the board before taking the restore
// lock, which deleteLeaderboard takes too, so the deletion and the creation went through meanwhile and the
// rebuild then cleared the new board and restored the deleted one's events.
func TestRestoreReadsTheBoardUnderItsLock(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := newHeldLedger(openLedger(t, pg.Database(t)))
	s := newStore(rdb, l, newClock())
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "again"}); err != nil {
		t.Fatal(err)
	}
	submit := func(p string) {
		if _, err := s.Submit(ctx, leaderboard.Submission{Board: "again", Player: p, Score: 1}); err != nil {
			t.Fatal(err)
		}
	}
	submit("old")
	l.arm(true)
	rebuilt := make(chan error, 1)
	go func() { rebuilt <- s.Rebuild(ctx, "again") }()
	<-l.entered
	// The deletion either goes through (the rebuild holds no lock yet) or answers UNAVAILABLE (it does); then it
	// is retried once the rebuild is done.
	_, delErr := s.DeleteBoard(ctx, "again")
	if delErr == nil {
		if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "again", Mode: leaderboard.Latest}); err != nil {
			t.Fatal(err)
		}
		submit("new")
	}
	close(l.release)
	if err := <-rebuilt; err != nil && leaderboard.ErrorCode(err) != leaderboard.NotFound {
		t.Fatal(err)
	}
	if delErr != nil {
		if leaderboard.ErrorCode(delErr) != leaderboard.Unavailable {
			t.Fatal(delErr)
		}
		if _, err := s.DeleteBoard(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "again", Mode: leaderboard.Latest}); err != nil {
			t.Fatal(err)
		}
		submit("new")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := s.Top(ctx, leaderboard.View{Board: "again"}, 0, 10)
		if err == nil {
			var ids []string
			for _, e := range p.Entries {
				ids = append(ids, e.PlayerID)
			}
			b, _ := s.Board(ctx, "again")
			if len(ids) != 1 || ids[0] != "new" || b == nil || b.Mode != leaderboard.Latest {
				t.Fatalf("after the deletion and creation: players %v, board %+v", ids, b)
			}
			return
		}
		if leaderboard.ErrorCode(err) != leaderboard.Unavailable || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}
