package leaderboard_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

func TestFairTies(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			t.Run(string(order), func(t *testing.T) {
				b := mustBoard(t, s, lb.Board{ID: "ties-" + string(order), Order: order, Mode: lb.Latest})
				v := lb.View{Board: b.ID}
				sub := func(p string, score float64) *lb.Result {
					return mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: score})
				}
				sub("A", 100)
				r := sub("B", 100)
				if r.Entry.Rank != 2 {
					t.Fatalf("B at 100 after A: rank %d, want 2", r.Entry.Rank)
				}
				if got := topIDs(t, s, v, 10); !slices.Equal(got, []string{"A", "B"}) {
					t.Fatalf("A then B at 100: %v", got)
				}
				// Resubmitting the same score keeps the position.
				r = sub("A", 100)
				if r.Updated || r.Entry.Rank != 1 {
					t.Fatalf("A resubmits 100: updated=%v rank=%d, want false 1", r.Updated, r.Entry.Rank)
				}
				// Leaving the score and coming back is a new arrival.
				sub("A", 90)
				r = sub("A", 100)
				if r.Entry.Rank != 2 || *r.PreviousScore != 90 {
					t.Fatalf("A back to 100: rank %d prev %v, want 2 90", r.Entry.Rank, *r.PreviousScore)
				}
				if got := topIDs(t, s, v, 10); !slices.Equal(got, []string{"B", "A"}) {
					t.Fatalf("after A left and came back: %v", got)
				}
				// Remove and re-add is a new arrival too.
				sub("C", 100)
				if ok, err := s.RemovePlayer(context.Background(), b.ID, "B"); err != nil || !ok {
					t.Fatalf("RemovePlayer: %v %v", ok, err)
				}
				sub("B", 100)
				if got := topIDs(t, s, v, 10); !slices.Equal(got, []string{"A", "C", "B"}) {
					t.Fatalf("after remove and re-add of B: %v", got)
				}
				// A better score ranks first whatever the order.
				better := 101.0
				if order == lb.Asc {
					better = 99
				}
				if r := sub("D", better); r.Entry.Rank != 1 {
					t.Fatalf("better score ranks %d", r.Entry.Rank)
				}
			})
		}
	})
}

func TestModes(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		best := mustBoard(t, s, lb.Board{ID: "best", Mode: lb.Best})
		r := mustSubmit(t, s, lb.Submission{Board: best.ID, Player: "p", Score: 50})
		if !r.Updated || r.PreviousRank != nil || r.PreviousScore != nil || r.Entry.Score != 50 {
			t.Fatalf("first BEST submission: %+v", r)
		}
		r = mustSubmit(t, s, lb.Submission{Board: best.ID, Player: "p", Score: 40})
		if r.Updated || r.Entry.Score != 50 || *r.PreviousScore != 50 {
			t.Fatalf("worse BEST score: %+v", r)
		}
		r = mustSubmit(t, s, lb.Submission{Board: best.ID, Player: "p", Score: 60.5})
		if !r.Updated || r.Entry.Score != 60.5 || *r.PreviousRank != 1 {
			t.Fatalf("better BEST score: %+v", r)
		}
		asc := mustBoard(t, s, lb.Board{ID: "best-asc", Mode: lb.Best, Order: lb.Asc})
		mustSubmit(t, s, lb.Submission{Board: asc.ID, Player: "p", Score: 61.25})
		if r := mustSubmit(t, s, lb.Submission{Board: asc.ID, Player: "p", Score: 70}); r.Updated {
			t.Fatalf("slower lap kept on ASC BEST board: %+v", r)
		}
		if r := mustSubmit(t, s, lb.Submission{Board: asc.ID, Player: "p", Score: 59.001}); r.Entry.Score != 59.001 {
			t.Fatalf("faster lap not kept: %+v", r)
		}

		latest := mustBoard(t, s, lb.Board{ID: "latest", Mode: lb.Latest})
		mustSubmit(t, s, lb.Submission{Board: latest.ID, Player: "p", Score: 50})
		if r := mustSubmit(t, s, lb.Submission{Board: latest.ID, Player: "p", Score: -3}); !r.Updated || r.Entry.Score != -3 {
			t.Fatalf("LATEST replace: %+v", r)
		}

		sum := mustBoard(t, s, lb.Board{ID: "sum", Mode: lb.Sum, MinScore: ptr(-10.0), MaxScore: ptr(100.0)})
		mustSubmit(t, s, lb.Submission{Board: sum.ID, Player: "q", Score: 5})
		mustSubmit(t, s, lb.Submission{Board: sum.ID, Player: "p", Score: 5})
		r = mustSubmit(t, s, lb.Submission{Board: sum.ID, Player: "p", Score: 0})
		if r.Updated || r.Entry.Rank != 2 {
			t.Fatalf("SUM delta 0 must keep the position: %+v", r)
		}
		r = mustSubmit(t, s, lb.Submission{Board: sum.ID, Player: "p", Score: 0.5})
		if !r.Updated || r.Entry.Score != 5.5 || r.Entry.Rank != 1 {
			t.Fatalf("SUM add: %+v", r)
		}
		// A total that would leave [min, max] is rejected, not clamped, and changes nothing.
		_, err := s.Submit(ctx, lb.Submission{Board: sum.ID, Player: "p", Score: 95})
		if lb.ErrorCode(err) != lb.Invalid {
			t.Fatalf("SUM over max: %v", err)
		}
		if e, _ := s.Rank(ctx, lb.View{Board: sum.ID}, "p"); e.Score != 5.5 {
			t.Fatalf("rejected SUM changed the total to %v", e.Score)
		}
		if r := mustSubmit(t, s, lb.Submission{Board: sum.ID, Player: "p", Score: -15.5}); r.Entry.Score != -10 {
			t.Fatalf("SUM to the min bound: %+v", r)
		}
	})
}

// 128 goroutines submit the same score for 128 new players at once: the ranks are 1..128 and the order of the
// list is the order in which the script ran, as the returned ranks tell.
func TestConcurrentTies(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			t.Run(string(order), func(t *testing.T) {
				b := mustBoard(t, s, lb.Board{ID: "race-" + string(order), Order: order})
				const n = 128
				ranks := make([]int64, n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprintf("p%03d", i), Score: 7})
						ranks[i] = r.Entry.Rank
					}()
				}
				close(start)
				wg.Wait()
				want := make([]string, n)
				for i, r := range ranks {
					if r < 1 || r > n || want[r-1] != "" {
						t.Fatalf("rank %d returned twice or out of range", r)
					}
					want[r-1] = fmt.Sprintf("p%03d", i)
				}
				if got := topIDs(t, s, lb.View{Board: b.ID}, n); !slices.Equal(got, want) {
					t.Fatalf("list order differs from script order:\n got %v\nwant %v", got, want)
				}
			})
		}
	})
}

func TestConcurrentSumAndRetries(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "sum", Mode: lb.Sum})
		var wg sync.WaitGroup
		for range 128 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1})
			}()
		}
		wg.Wait()
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "p"); e == nil || e.Score != 128 {
			t.Fatalf("128 concurrent +1: %+v", e)
		}

		// 1,000 events, each sent 5 times concurrently: applied once each.
		const events, tries = 1000, 5
		var mu sync.Mutex
		applied := map[string]int{}
		sem := make(chan struct{}, 64)
		for i := range events {
			for range tries {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					id := fmt.Sprintf("ev-%d", i)
					r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "q", Score: 1, EventID: id})
					if !r.Duplicate {
						mu.Lock()
						applied[id]++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		if len(applied) != events {
			t.Fatalf("%d events applied, want %d", len(applied), events)
		}
		for id, n := range applied {
			if n != 1 {
				t.Fatalf("event %s applied %d times", id, n)
			}
		}
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "q"); e == nil || e.Score != events {
			t.Fatalf("total after retried events: %+v", e)
		}
	})
}

func TestDuplicateReturnsFirstResult(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		b := mustBoard(t, s, lb.Board{ID: "dup"})
		first := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 10, EventID: "e1"})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "x", Score: 20})
		again := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 10, EventID: "e1"})
		if !again.Duplicate || first.Duplicate {
			t.Fatalf("duplicate flags: first %v again %v", first.Duplicate, again.Duplicate)
		}
		if again.Entry.Rank != first.Entry.Rank || again.Entry.Score != first.Entry.Score || again.Updated != first.Updated {
			t.Fatalf("retry result %+v differs from first %+v", again.Entry, first.Entry)
		}
	})
}
