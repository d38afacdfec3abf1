package leaderboard_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// boardDump returns every key of a board with its DUMP (type, value and encoding).
func boardDump(t *testing.T, s *lb.Store, tg redistest.Target, board string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range boardKeys(t, s, tg, board) {
		v, err := tg.Client.Dump(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

func sameDump(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if before[k] != v {
			t.Fatalf("%s changed key %s", what, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Fatalf("%s deleted key %s", what, k)
		}
	}
}

// The per-player submission limit, with the store's clock injected: N submissions a minute are applied (worse
// scores too), the next one is RATE_LIMITED and changes no key of the board (scores, ranks, records, histogram,
// counters), other players are not limited, the next minute allows N again; an eventId retry returns the first
// result even at the limit and is not counted; items of a batch count one by one; refused items do not count.
func TestSubmitLimitPerMinute(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		clock := &testClock{}
		base := time.Date(2030, 3, 4, 5, 6, 10, 0, time.UTC) // 10 s into a minute of the test's clock
		clock.Set(base)
		prefix := redistest.Prefix(t)
		s := lb.New(tg.Client, lb.Config{Prefix: prefix, Clock: clock.Now})
		const limit = 3
		b := mustBoard(t, s, lb.Board{ID: "limited", Windows: []lb.Window{lb.AllTime, lb.Daily}, ExactTop: 2,
			MaxSubmitsPerMinute: limit})
		if got, err := lb.New(tg.Client, lb.Config{Prefix: prefix}).Board(ctx, b.ID); err != nil ||
			got.MaxSubmitsPerMinute != limit {
			t.Fatalf("stored definition: %+v %v", got, err)
		}
		for i, p := range []string{"x", "y", "z"} { // x, y in the exact tier, z beyond it: a histogram exists
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: float64(100 - i)})
		}
		first := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 10, EventID: "e1"})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 5}) // not a new best: still counts
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 20})

		refused := func(what string, sub lb.Submission) {
			t.Helper()
			before := boardDump(t, s, tg, b.ID)
			_, err := s.Submit(ctx, sub)
			if lb.ErrorCode(err) != lb.RateLimited {
				t.Fatalf("%s: %v, want RATE_LIMITED", what, err)
			}
			sameDump(t, what, before, boardDump(t, s, tg, b.ID))
		}
		refused("the 4th submission", lb.Submission{Board: b.ID, Player: "p", Score: 99})
		clock.Set(base.Add(49 * time.Second)) // the last second of the same minute
		refused("the 5th submission", lb.Submission{Board: b.ID, Player: "p", Score: 30, EventID: "e2"})
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "p"); e == nil || e.Score != 20 {
			t.Fatalf("p after the refusals: %+v", e)
		}
		// A retry of an applied submission gets the first result back, limit or not.
		r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: 10, EventID: "e1"})
		if err != nil || !r.Duplicate || r.Entry.Score != 10 || r.Entry.Rank != first.Entry.Rank {
			t.Fatalf("retry at the limit: %+v %v, want the first result %+v", r, err, first)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "q", Score: 1}) // another player: own limit

		// The next minute: N again. The retry above did not count, and neither do a retry now nor a refused item.
		clock.Set(base.Add(50 * time.Second))
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 30, EventID: "e2"}) // refused before: new
		if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 30, EventID: "e2"}); !r.Duplicate {
			t.Fatalf("retry of e2: %+v", r)
		}
		if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: 1, EventID: "e2"}); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("e2 reused: %v", err)
		}
		// A batch: each item counts; the items past the limit fail alone.
		outs, err := s.SubmitMany(ctx, []lb.Submission{
			{Board: b.ID, Player: "p", Score: 31}, {Board: b.ID, Player: "q", Score: 2},
			{Board: b.ID, Player: "p", Score: 32}, {Board: b.ID, Player: "p", Score: 33},
			{Board: b.ID, Player: "p", Score: 30, EventID: "e2"}})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []lb.Code{"", "", "", lb.RateLimited, ""} {
			if lb.ErrorCode(outs[i].Err) != want {
				t.Fatalf("batch item %d: %+v, want %q", i, outs[i], want)
			}
		}
		if !outs[4].Result.Duplicate || outs[4].Result.Entry.Score != 30 {
			t.Fatalf("the retry in the batch: %+v", outs[4].Result)
		}
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "p"); e == nil || e.Score != 32 {
			t.Fatalf("p after the batch: %+v, want 32", e)
		}
	})
}

// Refused items (here a SUM total beyond the board's maximum) do not count against the limit.
func TestSubmitLimitCountsAppliedItems(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		b := mustBoard(t, s, lb.Board{ID: "sum-limited", Mode: lb.Sum, MaxScore: ptr(100.0), MaxSubmitsPerMinute: 2})
		outs, err := s.SubmitMany(context.Background(), []lb.Submission{
			{Board: b.ID, Player: "p", Score: 60}, {Board: b.ID, Player: "p", Score: 60},
			{Board: b.ID, Player: "p", Score: 10}, {Board: b.ID, Player: "p", Score: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []lb.Code{"", lb.Invalid, "", lb.RateLimited} {
			if lb.ErrorCode(outs[i].Err) != want {
				t.Fatalf("item %d: %+v, want %q", i, outs[i], want)
			}
		}
		if outs[2].Result.Entry.Score != 70 {
			t.Fatalf("total %v, want 70", outs[2].Result.Entry.Score)
		}
	})
}

// Concurrent submissions of one player within one minute: exactly the limit is applied (SUM counts each one), the
// rest are RATE_LIMITED.
func TestSubmitLimitConcurrent(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		clock := &testClock{}
		clock.Set(time.Date(2030, 3, 4, 5, 6, 0, 0, time.UTC))
		s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now, BatchLanes: 2})
		const limit, workers, each = 7, 16, 4
		b := mustBoard(t, s, lb.Board{ID: "race-limited", Mode: lb.Sum, MaxSubmitsPerMinute: limit})
		var ok, limited atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					_, err := s.Submit(context.Background(), lb.Submission{Board: b.ID, Player: "p", Score: 1,
						EventID: fmt.Sprintf("w%d-%d", w, i)})
					switch lb.ErrorCode(err) {
					case "":
						ok.Add(1)
					case lb.RateLimited:
						limited.Add(1)
					default:
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if ok.Load() != limit || limited.Load() != workers*each-limit {
			t.Fatalf("%d applied, %d limited; want %d and %d", ok.Load(), limited.Load(), limit, workers*each-limit)
		}
		if e, err := s.Rank(context.Background(), lb.View{Board: b.ID}, "p"); err != nil || e.Score != limit {
			t.Fatalf("total %+v %v, want %d", e, err, limit)
		}
	})
}

// The limit is part of the definition: the same id with another limit is a CONFLICT, with the same one the board;
// bounds 0 (none) to MaxSubmitsPerMinute.
func TestSubmitLimitDefinition(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		mustBoard(t, s, lb.Board{ID: "def-limited", MaxSubmitsPerMinute: 5})
		if _, err := s.CreateBoard(ctx, lb.Board{ID: "def-limited", MaxSubmitsPerMinute: 6}); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("another limit: %v", err)
		}
		if _, err := s.CreateBoard(ctx, lb.Board{ID: "def-limited"}); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("no limit: %v", err)
		}
		if b, err := s.CreateBoard(ctx, lb.Board{ID: "def-limited", MaxSubmitsPerMinute: 5}); err != nil ||
			b.MaxSubmitsPerMinute != 5 {
			t.Fatalf("the same limit: %+v %v", b, err)
		}
		for _, n := range []int{-1, lb.MaxSubmitsPerMinute + 1} {
			if _, err := s.CreateBoard(ctx, lb.Board{ID: "bad-limit", MaxSubmitsPerMinute: n}); lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("limit %d: %v", n, err)
			}
		}
		mustBoard(t, s, lb.Board{ID: "max-limit", MaxSubmitsPerMinute: lb.MaxSubmitsPerMinute})
	})
}
