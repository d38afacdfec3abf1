package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// createHeldLedger is a ledger that, once it has recorded a creation, waits for release before it answers (the
// board is in the ledger, its definition not yet in Redis: a slow creation).
type createHeldLedger struct {
	leaderboard.Ledger
	recorded, release chan struct{}
	once              sync.Once
}

func (l *createHeldLedger) Append(ctx context.Context, batches []leaderboard.AppendBatch) ([][]leaderboard.Appended,
	error) {
	res, err := l.Ledger.Append(ctx, batches)
	if err == nil && len(batches) == 1 && len(batches[0].Events) == 1 &&
		batches[0].Events[0].Kind == leaderboard.EventCreate {
		l.once.Do(func() { close(l.recorded) })
		<-l.release
	}
	return res, err
}

// A creation the ledger has recorded and Redis does not have yet is a board being created, not a lost one: ledger
// checks meanwhile restore nothing, and a read of it answers UNAVAILABLE (not NOT_FOUND) and starts no restore.
// Before, the second check in a row took it for lost and restored it under its creator, which answered UNAVAILABLE
// (a sharded creation under -race outlasted two checks of 20 ms in make test).
func TestLedgerCheckWhileABoardIsCreated(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := &createHeldLedger{Ledger: openLedger(t, pg.Database(t)), recorded: make(chan struct{}),
		release: make(chan struct{})}
	var restores atomic.Int32
	s := leaderboard.New(rdb, leaderboard.Config{Prefix: "lt", Clock: newClock().Now, Ledger: l,
		PublishCommand: leaderboard.PublishNone, OnRestore: func(leaderboard.RestoreReport) { restores.Add(1) }})
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateBoard(ctx, leaderboard.Board{ID: "slow", Shards: 3})
		created <- err
	}()
	<-l.recorded
	for i := range 3 {
		if n, err := s.CheckLedger(ctx); err != nil || n != 0 {
			t.Fatalf("ledger check %d while the board is created: %d boards lost or behind, %v; want 0", i+1, n, err)
		}
	}
	if _, err := s.Top(ctx, leaderboard.View{Board: "slow", Window: leaderboard.AllTime}, 0, 10); leaderboard.ErrorCode(err) != leaderboard.Unavailable {
		t.Fatalf("a read while the board is created: %v; want UNAVAILABLE", err)
	}
	close(l.release)
	if err := <-created; err != nil {
		t.Fatalf("the creation: %v", err)
	}
	p, err := s.Top(ctx, leaderboard.View{Board: "slow", Window: leaderboard.AllTime}, 0, 10)
	if err != nil || p.Size != 0 || len(p.Entries) != 0 {
		t.Fatalf("the board once created: %+v, %v", p, err)
	}
	if n, err := s.CheckLedger(ctx); err != nil || n != 0 {
		t.Fatalf("ledger check after the creation: %d, %v", n, err)
	}
	if n := restores.Load(); n != 0 {
		t.Fatalf("%d restores of a board that was never lost", n)
	}
}
