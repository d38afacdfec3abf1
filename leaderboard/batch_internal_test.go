package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// scriptCalls counts the calls of one script that takes items (sc: submitScript, rankScript) and the items each
// carried.
type scriptCalls struct {
	sc    *script
	mu    sync.Mutex
	items []int
}

// see records an FCALL of the script's function: FCALL <library>_<role> 1 <key> <header...> <items...>.
func (c *scriptCalls) see(cmd redis.Cmder) {
	a, it := cmd.Args(), c.sc.items
	if len(a) > 4+it.header && strings.EqualFold(fmt.Sprint(a[0]), "fcall") &&
		strings.HasSuffix(fmt.Sprint(a[1]), "_"+c.sc.role) {
		var n int
		fmt.Sscan(fmt.Sprint(a[4+it.count]), &n)
		c.mu.Lock()
		c.items = append(c.items, n)
		c.mu.Unlock()
	}
}

func (c *scriptCalls) take() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.items
	c.items = nil
	return out
}

// queued runs fn for callers 0..n-1 on a store whose batcher has no lane yet, starting caller i once the calls
// of the callers before it wait in the queue (so the queue holds them in caller order), then starts one lane: it
// takes them all as one batch, as it does under load. It returns when every caller has returned, with the
// store's calls going on their own again.
func queued(t *testing.T, s *Store, n int, fn func(i int)) {
	t.Helper()
	s.batch = &batcher{fns: s.fns, queue: make(chan *scriptCall, 64), maxBatch: maxBatch, timeout: batchTimeout}
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * time.Second)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
		for len(s.batch.queue) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d calls queued after 10 s", len(s.batch.queue), i+1)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	go s.batch.lane()
	wg.Wait()
	close(s.batch.queue) // the lane ends
	s.batch = nil        // later calls go on their own
}

// Submissions that wait in the batcher together, on one board with one header, go to Redis as one script call of
// their items (up to maxMergedItems); every caller gets what a call of its own gives. The oracle is a second
// board that takes the same submissions one call each, in the order the merged call applied them: every result
// and refusal (conflicting eventId, submission limit, duplicate) and the final ranking are the same. Calls for another board, or with another clock second, are not merged.
func TestMergedSubmissions(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			calls := &scriptCalls{sc: submitScript}
			tg.Client.AddHook(redistest.Commands{See: calls.see})
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			var clock sync.Mutex
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time {
				clock.Lock()
				defer clock.Unlock()
				return now
			}})
			def := Board{Mode: Best, MaxScore: ptr(1000.0), MaxSubmitsPerMinute: 2, Windows: []Window{AllTime, Daily}}
			for _, id := range []string{"merged", "oracle", "other"} {
				def.ID = id
				if _, err := s.CreateBoard(ctx, def); err != nil {
					t.Fatal(err)
				}
			}
			// Caller i: player p<i/3> (three calls each, so the third is over the limit of 2 a minute),
			// eventIds shared by callers 0/1 (one conflicts), 6/7 (a retry: the same payload). Scores out of range
			// are refused before any script runs.
			sub := func(board string, i int) Submission {
				s := Submission{Board: board, Player: fmt.Sprint("p", i/3), Score: float64(10 + i*7%23)}
				switch i {
				case 0, 1:
					s.EventID = "e01"
				case 6, 7:
					s.EventID, s.Score = "e67", 50
				}
				return s
			}
			const n = 40
			type outcome struct {
				r   *Result
				err error
			}
			got := make([]outcome, n)
			queued(t, s, n, func(i int) {
				r, err := s.Submit(ctx, sub("merged", i))
				got[i] = outcome{r, err}
			})
			sizes := calls.take()
			if len(sizes) != 1 || sizes[0] != n {
				t.Fatalf("submit calls carried %v items, want one call of %d", sizes, n)
			}

			codes := map[Code]int{}
			for _, o := range got {
				if o.r != nil && o.r.Duplicate {
					codes["dup"]++
				}
				codes[ErrorCode(o.err)]++
			}
			// The third call of each player is over the limit, but for p0 and p2, whose conflict and duplicate
			// did not count.
			if codes[Conflict] != 1 || codes[RateLimited] != n/3-2 || codes["dup"] != 1 {
				t.Fatalf("outcomes %v, want one CONFLICT, %d RATE_LIMITED and one duplicate", codes, n/3-2)
			}
			// One call published one event, and every applied item names it.
			var event *Result
			for i, o := range got {
				if o.r == nil || o.r.Duplicate {
					continue
				}
				if event == nil {
					event = o.r
				}
				if o.r.EventVersion == 0 || o.r.EventEpoch == "" || o.r.EventVersion != event.EventVersion ||
					o.r.EventEpoch != event.EventEpoch {
					t.Fatalf("caller %d names event %s/%d, want the call's one event %s/%d", i,
						o.r.EventEpoch, o.r.EventVersion, event.EventEpoch, event.EventVersion)
				}
			}
			// The oracle: each submission alone, in the same order; each one that changed something published
			// the board's next event.
			var version int64
			for i := range n {
				r, err := s.Submit(ctx, sub("oracle", i))
				if !sameOutcome(got[i].r, got[i].err, r, err) {
					t.Errorf("caller %d: merged %+v %v, alone %+v %v", i, got[i].r, got[i].err, r, err)
				}
				switch {
				case r == nil || r.Duplicate || !r.Updated:
					if r != nil && r.EventVersion != 0 {
						t.Errorf("caller %d: alone, changed nothing but names event %d", i, r.EventVersion)
					}
				case r.EventVersion != version+1:
					t.Errorf("caller %d: alone, names event %d, want %d", i, r.EventVersion, version+1)
				default:
					version = r.EventVersion
				}
			}
			for _, w := range []Window{AllTime, Daily} {
				period := AllPeriod
				if w == Daily {
					period = periodKey(Daily, periodStart(Daily, now, time.UTC))
				}
				a, errA := s.Top(ctx, View{Board: "merged", Window: w, Period: period}, 0, 100)
				b, errB := s.Top(ctx, View{Board: "oracle", Window: w, Period: period}, 0, 100)
				if errA != nil || errB != nil || len(a.Entries) == 0 || !reflect.DeepEqual(a.Entries, b.Entries) ||
					a.Size != b.Size {
					t.Fatalf("%s ranking: merged %+v (%v), alone %+v (%v)", w, a, errA, b, errB)
				}
			}

			// Two boards, each at two clock seconds: four calls, in the order of their first callers.
			calls.take()
			queued(t, s, 6, func(i int) {
				board := "merged"
				if i%2 == 1 {
					board = "other"
				}
				if i == 4 {
					clock.Lock()
					now = now.Add(time.Second)
					clock.Unlock()
				}
				if _, err := s.Submit(ctx, Submission{Board: board, Player: fmt.Sprint("q", i), Score: 1}); err != nil {
					t.Error(err)
				}
			})
			if sizes := calls.take(); !reflect.DeepEqual(sizes, []int{2, 2, 1, 1}) {
				t.Fatalf("submit calls carried %v items, want [2 2 1 1]: a call per board and clock second", sizes)
			}

			// Calls are merged up to maxMergedItems items: three batches of 60 make a call of 120 and one of 60.
			queued(t, s, 3, func(i int) {
				subs := make([]Submission, 60)
				for k := range subs {
					subs[k] = Submission{Board: "merged", Player: fmt.Sprint("m", i, "-", k), Score: 1}
				}
				if _, err := s.SubmitMany(ctx, subs); err != nil {
					t.Error(err)
				}
			})
			if sizes := calls.take(); maxMergedItems != 128 || !reflect.DeepEqual(sizes, []int{120, 60}) {
				t.Fatalf("submit calls carried %v items (at most %d), want [120 60] (at most 128, the README's figure)",
					sizes, maxMergedItems)
			}

			// A merged call that fails fails for each of its callers: a board another process deleted since this
			// one read its definition.
			if _, err := s.Submit(ctx, Submission{Board: "other", Player: "r", Score: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := New(tg.Client, Config{Prefix: s.Prefix()}).DeleteBoard(ctx, "other"); err != nil {
				t.Fatal(err)
			}
			calls.take()
			queued(t, s, 5, func(i int) {
				if _, err := s.Submit(ctx, Submission{Board: "other", Player: fmt.Sprint("r", i), Score: 1}); ErrorCode(err) != NotFound {
					t.Errorf("caller %d on a deleted board: %v, want NOT_FOUND", i, err)
				}
			})
			if sizes := calls.take(); !reflect.DeepEqual(sizes, []int{5}) {
				t.Fatalf("submit calls carried %v items, want [5]", sizes)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// sameOutcome reports whether two submissions had the same result, or were refused with the same error.
func sameOutcome(r1 *Result, err1 error, r2 *Result, err2 error) bool {
	if err1 != nil || err2 != nil {
		return err1 != nil && err2 != nil && err1.Error() == err2.Error() && ErrorCode(err1) == ErrorCode(err2)
	}
	// The event a result names differs by construction: one call, one event.
	a, b := *r1, *r2
	a.EventEpoch, a.EventVersion, b.EventEpoch, b.EventVersion = "", 0, "", 0
	return reflect.DeepEqual(a, b)
}

// A call whose caller's deadline passes while it waits for a lane is answered with DeadlineExceeded and never
// sent (nothing of it is written); the call queued behind it, without a deadline, goes to Redis on its own and
// is applied. (That a lane's round trip ends by its calls' deadline with Redis stalled is
// TestRequestTimeoutBoundsAStalledRedis, in internal/server.)
func TestCallsPastTheirDeadlineAreNotSent(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			calls := &scriptCalls{sc: submitScript}
			tg.Client.AddHook(redistest.Commands{See: calls.see})
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
			if _, err := s.CreateBoard(ctx, Board{ID: "late", Mode: Latest}); err != nil {
				t.Fatal(err)
			}
			calls.take()
			const wait = 30 * time.Millisecond
			errs := make([]error, 2)
			var updated bool
			queued(t, s, 2, func(i int) {
				if i == 0 {
					dctx, cancel := context.WithTimeout(ctx, wait)
					defer cancel()
					_, errs[0] = s.Submit(dctx, Submission{Board: "late", Player: "timed", Score: 1})
					return
				}
				time.Sleep(3 * wait) // the lane starts after this call is queued: the first one's deadline is past
				var r *Result
				r, errs[1] = s.Submit(ctx, Submission{Board: "late", Player: "untimed", Score: 2})
				updated = r != nil && r.Updated
			})
			if !errors.Is(errs[0], context.DeadlineExceeded) || ErrorCode(errs[0]) != Unavailable {
				t.Errorf("the call past its deadline: %v, want DeadlineExceeded (UNAVAILABLE)", errs[0])
			}
			if errs[1] != nil || !updated {
				t.Errorf("the call without a deadline: updated %v, %v", updated, errs[1])
			}
			if got := calls.take(); !reflect.DeepEqual(got, []int{1}) {
				t.Errorf("submit calls sent (items each): %v, want [1]", got)
			}
			for p, want := range map[string]bool{"timed": false, "untimed": true} {
				e, err := s.Rank(ctx, View{Board: "late"}, p)
				if err != nil || (e != nil) != want {
					t.Errorf("rank of %s: %+v %v, want a score %v", p, e, err, want)
				}
			}
		})
	}
}
