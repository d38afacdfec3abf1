package leaderboard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// With BatchLanes, concurrent calls share pipelines; each still gets its own result, and the scripts survive a
// Redis that forgot them (SCRIPT FLUSH).
func TestBatchedCallsKeepTheirOwnResults(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), BatchLanes: 2})
			mustBoard(t, s, lb.Board{ID: "batch", Mode: lb.Latest})
			for round := range 2 {
				if round == 1 {
					if err := tg.Client.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				for g := range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 20 {
							p := fmt.Sprintf("g%d-%d", g, i)
							score := float64(round*100000 + g*1000 + i)
							r, err := s.Submit(ctx, lb.Submission{Board: "batch", Player: p, Score: score})
							if err != nil || r.Entry.PlayerID != p || r.Entry.Score != score || !r.Updated {
								t.Errorf("%s: %+v %v", p, r, err)
								return
							}
							e, err := s.Rank(ctx, lb.View{Board: "batch"}, p)
							if err != nil || e == nil || e.PlayerID != p || e.Score < score {
								t.Errorf("rank of %s: %+v %v", p, e, err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			if n, err := s.Size(ctx, lb.View{Board: "batch"}); err != nil || n != 64*20 {
				t.Fatalf("size %d %v", n, err)
			}
			top := topIDs(t, s, lb.View{Board: "batch"}, 3)
			if top[0] != "g63-19" || top[1] != "g63-18" || top[2] != "g63-17" {
				t.Fatalf("top %v", top)
			}
			// A call whose context ends while it waits returns at once.
			cctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			time.Sleep(time.Millisecond)
			if _, err := s.Submit(cctx, lb.Submission{Board: "batch", Player: "late", Score: 1}); err == nil {
				t.Fatal("a call with an ended context succeeded")
			}
		})
	}
}
