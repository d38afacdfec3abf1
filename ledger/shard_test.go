package ledger_test

import (
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedBoardRefusedWithLedger: a store with the ledger on refuses to create a sharded board with
// BAD_USER_INPUT, and records nothing of it (neither in the ledger nor in Redis); the same store creates the
// unsharded board (shards 0 and 1). A sharded board that a store without the ledger created is refused to the
// ledgered store too (its writes would bypass the record).
func TestShardedBoardRefusedWithLedger(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	prefix := redistest.Prefix(t)
	c := newClock()
	s := leaderboard.New(rdb, leaderboard.Config{Prefix: prefix, Clock: c.Now, Ledger: l,
		PublishCommand: leaderboard.PublishNone})
	for _, shards := range []int{2, 3, leaderboard.MaxShards} {
		if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "sharded", Shards: shards}); leaderboard.ErrorCode(err) != leaderboard.Invalid {
			t.Fatalf("CreateBoard(Shards %d) with the ledger: %v, want BAD_USER_INPUT", shards, err)
		}
	}
	if _, ok, err := l.Board(ctx, "sharded"); err != nil || ok {
		t.Fatalf("the ledger holds the refused board: %v, %v", ok, err)
	}
	if n, err := rdb.Exists(ctx, leaderboard.CountersKey(prefix, "sharded")).Result(); err != nil || n != 0 {
		t.Fatalf("Redis has keys of the refused board: %d, %v", n, err)
	}
	if keys, err := rdb.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("Redis keys after the refusals: %v, %v", keys, err)
	}
	for i, shards := range []int{0, 1} {
		b, err := s.CreateBoard(ctx, leaderboard.Board{ID: []string{"plain-0", "plain-1"}[i], Shards: shards})
		if err != nil || b.Shards > 1 {
			t.Fatalf("CreateBoard(Shards %d) with the ledger: %+v, %v; want an unsharded board", shards, b, err)
		}
	}

	// Created without the ledger, then met by a ledgered store.
	plain := leaderboard.New(rdb, leaderboard.Config{Prefix: prefix, Clock: c.Now, PublishCommand: leaderboard.PublishNone})
	if _, err := plain.CreateBoard(ctx, leaderboard.Board{ID: "made-plain", Shards: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, leaderboard.Submission{Board: "made-plain", Player: "p", Score: 1}); err == nil {
		t.Fatal("a ledgered store wrote to a sharded board the ledger does not record")
	}
	if e, err := plain.Rank(ctx, leaderboard.View{Board: "made-plain"}, "p"); err != nil || e != nil {
		t.Fatalf("the refused write landed: %+v, %v", e, err)
	}
}
