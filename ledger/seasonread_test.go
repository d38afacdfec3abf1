package ledger_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// seasonReads counts the reads of a board's SEASON state (an HMGET of its season key) that pass a client.
type seasonReads struct{ n atomic.Int64 }

func (h *seasonReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *seasonReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *seasonReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); strings.EqualFold(cmd.Name(), "hmget") && len(a) > 1 {
			if k, _ := a[1].(string); strings.HasSuffix(k, ":season") {
				h.n.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

// TestDefaultSeasonReadAsksOnce: with the ledger on, a read of a SEASON window without a period asks Redis for the
// latest season once (to learn whether it ended, and which it is), not once to look for frozen standings and again
// to resolve the period; and it answers the running season.
func TestDefaultSeasonReadAsksOnce(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	var h seasonReads
	rdb.AddHook(&h)
	c := newClock()
	s := newStore(rdb, openLedger(t, pgtest.Shared(t).Database(t)), c)
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "seasons", Windows: []leaderboard.Window{leaderboard.Season}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartSeason(ctx, "seasons", "s1", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	submitAll(ctx, t, s, []leaderboard.Submission{{Board: "seasons", Player: "p", Score: 3}})
	h.n.Store(0)
	p, err := s.Top(ctx, leaderboard.View{Board: "seasons"}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if p.Period != "s1" || len(p.Entries) != 1 || p.Entries[0].PlayerID != "p" || p.Entries[0].Score != 3 {
		t.Fatalf("top of the running season: %+v, want s1 with p 3", p)
	}
	if n := h.n.Load(); n != 1 {
		t.Fatalf("the read asked for the latest season %d times, want 1", n)
	}
}
