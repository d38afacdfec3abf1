package leaderboard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// testClock is an injectable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// eachTarget runs f against the shared standalone Redis and the shared 3-primary cluster, with a fresh key prefix.
func eachTarget(t *testing.T, f func(t *testing.T, s *lb.Store, tg redistest.Target)) {
	t.Helper()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f(t, lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t)}), tg)
		})
	}
}

// clockedStore returns a store with s's prefix and publish command on tg whose clock is the returned test clock,
// set to at.
func clockedStore(s *lb.Store, tg redistest.Target, at time.Time) (*lb.Store, *testClock) {
	clock := &testClock{t: at}
	return lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now, PublishCommand: s.PublishCommand()}), clock
}

func mustBoard(t *testing.T, s *lb.Store, b lb.Board) *lb.Board {
	t.Helper()
	nb, err := s.CreateBoard(context.Background(), b)
	if err != nil {
		t.Fatalf("CreateBoard(%q): %v", b.ID, err)
	}
	return nb
}

func mustSubmit(t *testing.T, s *lb.Store, sub lb.Submission) *lb.Result {
	t.Helper()
	r, err := s.Submit(context.Background(), sub)
	if err != nil {
		t.Fatalf("Submit(%+v): %v", sub, err)
	}
	return r
}

// topIDs returns the player ids of the first n ranks.
func topIDs(t *testing.T, s *lb.Store, v lb.View, n int) []string {
	t.Helper()
	p, err := s.Top(context.Background(), v, 0, n)
	if err != nil {
		t.Fatalf("Top: %v", err)
	}
	ids := make([]string, len(p.Entries))
	for i, e := range p.Entries {
		ids[i] = e.PlayerID
		if e.Rank != int64(i+1) {
			t.Fatalf("Top: entry %d has rank %d", i, e.Rank)
		}
	}
	return ids
}

func ptr[T any](v T) *T { return &v }
