package leaderboard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// stalledRedis returns a store on a redis-server of the test's own (a stall must not reach the other tests'
// shared one), with the server's client settings that matter here (a context's deadline reaches socket reads,
// no retries), and a function that stalls that Redis for d (CLIENT PAUSE: every command waits, then runs).
func stalledRedis(t *testing.T, cfg Config) (*Store, func(d time.Duration)) {
	t.Helper()
	rs := redistest.Standalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close(); admin.Close() })
	cfg.Prefix = redistest.Prefix(t)
	return New(rdb, cfg), func(d time.Duration) {
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Two submissions merged into one script call on one board while Redis stalls, one caller with 100 ms left and
// one with 10 s: the first fails by its own deadline, while Redis still holds the call (UNAVAILABLE, outcome
// unknown: it is applied when Redis resumes), and the second is answered with its result once Redis answers.
// (The pipeline's round trip used to end at the earliest deadline of its calls: both failed.)
func TestCallFailsOnlyByItsOwnDeadline(t *testing.T) {
	t.Parallel()
	s, stall := stalledRedis(t, Config{})
	ctx := context.Background()
	if _, err := s.CreateBoard(ctx, Board{ID: "stall", Mode: Latest}); err != nil {
		t.Fatal(err)
	}
	const short, pause = 100 * time.Millisecond, 1500 * time.Millisecond
	stall(pause)
	paused := time.Now()
	var errA, errB error
	var tookA time.Duration
	var resB *Result
	queued(t, s, 2, func(i int) { // one batch: merged into one call of two items
		if i == 0 {
			actx, cancel := context.WithTimeout(ctx, short)
			defer cancel()
			start := time.Now()
			_, errA = s.Submit(actx, Submission{Board: "stall", Player: "a", Score: 1})
			tookA = time.Since(start)
			return
		}
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resB, errB = s.Submit(bctx, Submission{Board: "stall", Player: "b", Score: 2})
	})
	if errB == nil && time.Since(paused) < pause {
		t.Fatalf("the calls ended within the stall (%v): the test proves nothing", time.Since(paused))
	}
	if !errors.Is(errA, context.DeadlineExceeded) || ErrorCode(errA) != Unavailable || !OutcomeUnknown(errA) {
		t.Errorf("the caller with %v left: %v, want DeadlineExceeded (UNAVAILABLE, outcome unknown)", short, errA)
	}
	if tookA > pause/2 {
		t.Errorf("the caller with %v left was answered after %v, not at its deadline", short, tookA)
	}
	if errB != nil || resB == nil || !resB.Updated || resB.Entry.Score != 2 {
		t.Errorf("the caller with 10 s left: %+v %v, want its result", resB, errB)
	}
	// A second read path, a script of its own: both writes were applied (a's outcome was unknown, not failed).
	for p, want := range map[string]float64{"a": 1, "b": 2} {
		e, err := s.Rank(ctx, View{Board: "stall"}, p)
		if err != nil || e == nil || e.Score != want {
			t.Errorf("rank of %s after the stall: %+v %v, want score %v", p, e, err, want)
		}
	}
}

// With Redis stalled, calls that wait for a slot held by calls stuck on Redis are UNAVAILABLE, outcome known (never
// sent), not RATE_LIMITED: the server is not busy, Redis does not answer. Once Redis answers, calls go through.
func TestStalledRedisIsUnavailableNotBusy(t *testing.T) {
	t.Parallel()
	const wait, pause = 300 * time.Millisecond, 2 * time.Second
	s, stall := stalledRedis(t, Config{MaxWrites: 1, QueueWait: wait})
	ctx := context.Background()
	if _, err := s.CreateBoard(ctx, Board{ID: "stall"}); err != nil {
		t.Fatal(err)
	}
	// A run proves something only if the waiting call's wait ended within the stall: on a machine busy enough to
	// delay it past the stall, it is tried again (at most 3 runs).
	for run := 1; ; run++ {
		stall(pause)
		paused := time.Now()
		ended := s.writes.ended.Load()
		holding := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // takes the one write slot and waits on Redis
			defer wg.Done()
			close(holding)
			s.Submit(ctx, Submission{Board: "stall", Player: "stuck", Score: 1})
		}()
		<-holding
		for s.writes.ended.Load() == ended && len(s.writes.slots) == 0 {
			time.Sleep(time.Millisecond) // until the stuck call holds the slot
		}
		_, err := s.Submit(ctx, Submission{Board: "stall", Player: "waiting", Score: 2})
		waited := time.Since(paused)
		wg.Wait()
		if waited >= pause && run < 3 {
			t.Logf("run %d: the wait ended %v after the stall began, past it: again", run, waited)
			continue
		}
		if ErrorCode(err) != Unavailable || OutcomeUnknown(err) {
			t.Errorf("a call waiting behind a stalled Redis: %v (%s, outcome unknown %v), want UNAVAILABLE, outcome "+
				"known (its wait ended %v after the stall began)", err, ErrorCode(err), OutcomeUnknown(err), waited)
		}
		break
	}
	if _, err := s.Submit(ctx, Submission{Board: "stall", Player: "after", Score: 3}); err != nil {
		t.Errorf("after the stall: %v", err)
	}
}

// A waiter that gets no slot while the calls ahead of it end one after another (a busy server, Redis answering)
// is RATE_LIMITED.
func TestBusyGateIsRateLimited(t *testing.T) {
	t.Parallel()
	const hold, wait, ahead = 20 * time.Millisecond, 300 * time.Millisecond, 60
	g := newGate(1, wait)
	release, err := g.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for range ahead { // callers that wait as long as it takes, then hold the slot a moment: far more than the wait allows
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			g.slots <- struct{}{}
			time.Sleep(hold)
			g.release()
		}()
	}
	started.Wait()
	time.Sleep(50 * time.Millisecond) // they queue for the slot (a waiter needs only wait/hold of them ahead)
	go func() { time.Sleep(hold); release() }()
	_, err = g.acquire(context.Background())
	if ErrorCode(err) != RateLimited {
		t.Errorf("a waiter behind calls that end: %v, want RATE_LIMITED", err)
	}
	if g.ended.Load() == 0 {
		t.Errorf("no call ended during the wait: the test proves nothing")
	}
	wg.Wait()
}

// A caller without a deadline that gives up (its context canceled: the demo stopping) leaves its call running on a
// stalled Redis; Drain waits for that call to end, so closing Redis after it fails nothing (the server logged
// "redis command failed ... use of closed network connection" when `make run` stopped).
func TestDrainWaitsForCallsWhoseCallersLeft(t *testing.T) {
	t.Parallel()
	s, stall := stalledRedis(t, Config{BatchLanes: 1})
	ctx := context.Background()
	if _, err := s.CreateBoard(ctx, Board{ID: "drain"}); err != nil {
		t.Fatal(err)
	}
	const pause = 800 * time.Millisecond
	stall(pause)
	paused := time.Now()
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := s.Submit(cctx, Submission{Board: "drain", Player: "p", Score: 1})
		left <- err
	}()
	for s.batch.pending.Load() == 0 {
		time.Sleep(time.Millisecond) // until the call is handed to the batcher
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	s.Drain(dctx)
	if dctx.Err() != nil || s.batch.pending.Load() != 0 {
		t.Fatalf("Drain gave up: %d calls pending", s.batch.pending.Load())
	}
	if time.Since(paused) < pause {
		t.Errorf("Drain returned %v into a %v stall, before Redis answered the call", time.Since(paused), pause)
	}
	e, err := s.Rank(ctx, View{Board: "drain"}, "p")
	if err != nil || e == nil || e.Score != 1 {
		t.Errorf("the call whose caller left: %+v %v, want it applied", e, err)
	}
}
