package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The request context behaves as context.WithTimeout's: the deadline it reports, its end at the deadline, at the
// parent's cancellation and when the handler returns, and children that need no goroutine of their own.

func waitDone(t *testing.T, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("context not done within %s", within)
	}
}

func TestRequestContextDeadline(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	ctx := newRequestContext(context.Background(), deadline)
	defer ctx.end()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
		t.Errorf("Deadline %v %v, want %v", d, ok, deadline)
	}
	if ctx.timed.Load() != nil {
		t.Error("Deadline started the timer")
	}
	if err := ctx.Err(); err != nil {
		t.Errorf("Err before the deadline: %v", err)
	}
	waitDone(t, ctx, 10*time.Second)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Now().Before(deadline) {
		t.Errorf("done at %v (deadline %v) with %v, want DeadlineExceeded at the deadline", time.Now(), deadline,
			ctx.Err())
	}

	// A parent's earlier deadline is the request's.
	parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Second))
	defer cancel()
	pd, _ := parent.Deadline()
	inner := newRequestContext(parent, time.Now().Add(time.Hour))
	defer inner.end()
	if d, _ := inner.Deadline(); !d.Equal(pd) {
		t.Errorf("Deadline %v, want the parent's earlier %v", d, pd)
	}
}

func TestRequestContextCancel(t *testing.T) {
	// The parent's cancellation, with the timer started before and after it.
	for _, startFirst := range []bool{true, false} {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), principalTestKey{}, "p"))
		ctx := newRequestContext(parent, time.Now().Add(time.Hour))
		if startFirst {
			ctx.Done()
		}
		cancel()
		waitDone(t, ctx, 10*time.Second)
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("started first %v: Err %v, want Canceled", startFirst, ctx.Err())
		}
		if v := ctx.Value(principalTestKey{}); v != "p" {
			t.Errorf("Value %v, want the parent's", v)
		}
		ctx.end()
	}

	// The handler returned: canceled, whether the timer was started before or only after.
	for _, startFirst := range []bool{true, false} {
		ctx := newRequestContext(context.Background(), time.Now().Add(time.Hour))
		if startFirst {
			ctx.Done()
		}
		ctx.end()
		waitDone(t, ctx, 10*time.Second)
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("after end (started first %v): Err %v, want Canceled", startFirst, ctx.Err())
		}
	}
}

type principalTestKey struct{}

// Children made from it (context.WithCancel, AfterFunc) find its cancellation without a goroutine each, as they
// do under context.WithTimeout, and end with it.
func TestRequestContextChildren(t *testing.T) {
	ctx := newRequestContext(context.Background(), time.Now().Add(time.Hour))
	before := runtime.NumGoroutine()
	var children []context.Context
	for range 200 {
		c, cancel := context.WithCancel(ctx)
		defer cancel()
		children = append(children, c)
	}
	var after sync.WaitGroup
	after.Add(1)
	stop := context.AfterFunc(ctx, after.Done)
	defer stop()
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Errorf("goroutines %d → %d for 200 children: they need one each", before, n)
	}
	ctx.end()
	for _, c := range children {
		waitDone(t, c, 10*time.Second)
	}
	after.Wait()
}

// Many goroutines asking at once (under -race: no data race; one timed context for all).
func TestRequestContextConcurrent(t *testing.T) {
	ctx := newRequestContext(context.Background(), time.Now().Add(20*time.Millisecond))
	var wg sync.WaitGroup
	dones := make([]<-chan struct{}, 64)
	for i := range dones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dones[i] = ctx.Done()
			_ = ctx.Err()
			_ = ctx.Value(principalTestKey{})
		}()
	}
	wg.Wait()
	for _, d := range dones[1:] {
		if d != dones[0] {
			t.Fatal("Done returned different channels")
		}
	}
	waitDone(t, ctx, 10*time.Second)
	ctx.end()
}

// A request answered without waiting on anything never starts the timer; one that waits gets REQUEST_TIMEOUT.
func TestWithTimeoutStartsTimerOnlyWhenWaitedOn(t *testing.T) {
	a := &App{cfg: Config{RequestTimeout: 30 * time.Millisecond}}
	var got *requestContext
	quick := a.withTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Context().(*requestContext)
		if d, ok := r.Context().Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
			t.Errorf("deadline %v %v, want REQUEST_TIMEOUT from now", d, ok)
		}
		w.Write([]byte("ok"))
	}))
	quick.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/graphql", nil))
	if got == nil || got.timed.Load() != nil {
		t.Fatalf("a request that never waited started a timer (%v)", got)
	}
	if !errors.Is(got.Err(), context.Canceled) {
		t.Errorf("after the handler returned: Err %v, want Canceled", got.Err())
	}

	var err error
	slow := a.withTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			err = r.Context().Err()
		case <-time.After(10 * time.Second):
		}
	}))
	start := time.Now()
	slow.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/graphql", nil))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 30*time.Millisecond {
		t.Errorf("a request waiting on its context: %v after %v, want DeadlineExceeded after 30ms", err,
			time.Since(start))
	}
}

// REQUEST_TIMEOUT bounds a request whose Redis stops answering: reads and writes (both go through the store's
// batcher) answer UNAVAILABLE at about REQUEST_TIMEOUT, long before Redis answers again or a socket read times
// out (3 s, redisTimeout), and the server serves again once Redis does.
func TestRequestTimeoutBoundsAStalledRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + rs.Addr
	cfg.RequestTimeout = 250 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "stall"})
	s.submit(t, map[string]any{"board": "stall", "playerId": "a", "score": 1})

	admin := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer admin.Close()
	const pause = 5 * time.Second
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	requests := []struct{ key, query string }{
		{"", `{ rank(board: "stall", playerId: "a") { rank } }`},
		{testSubmitKey, `mutation { submitScore(input: {board: "stall", playerId: "b", score: 2}) { updated } }`},
		{"", `{ aroundMe(board: "stall", playerId: "a", radius: 1) { rank } }`},
	}
	var wg sync.WaitGroup
	for _, rq := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r := s.do(t, rq.key, rq.query, nil)
			took := time.Since(start)
			if len(r.Errors) != 1 || r.Errors[0].Code() != "UNAVAILABLE" {
				t.Errorf("%s with Redis stalled: status %d errors %+v, want UNAVAILABLE", rq.query, r.Status, r.Errors)
			}
			// REQUEST_TIMEOUT is 250 ms; without it the request would wait for the socket timeout (3 s).
			if took < cfg.RequestTimeout || took > 2*time.Second {
				t.Errorf("%s answered after %v with Redis stalled, want about REQUEST_TIMEOUT (%v)", rq.query, took,
					cfg.RequestTimeout)
			}
		}()
	}
	wg.Wait()
	if time.Since(paused) >= pause {
		t.Fatalf("the requests took the whole pause (%v): the test proves nothing", pause)
	}
	// Redis answers again when the pause ends; so does the server.
	deadline := paused.Add(pause + 15*time.Second)
	for {
		r := s.do(t, "", `{ rank(board: "stall", playerId: "a") { rank } }`, nil)
		if len(r.Errors) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer %v after the pause ended: %+v", 15*time.Second, r.Errors)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
