package server

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Writes go on while voids rebuild the board: each write retried with its eventId until it answers counts once,
// and the voided ones not at all: the SUM totals end as the model says (every write's delta, less the voided).
func TestLedgerVoidUnderWrites(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	s.create(t, map[string]any{"id": "w", "mode": "SUM", "windows": []string{"ALL_TIME", "DAILY"}})
	for i := range 20 {
		s.submit(t, map[string]any{"board": "w", "playerId": fmt.Sprintf("p%d", i%4), "score": 1000,
			"eventId": fmt.Sprintf("seed%d", i)})
	}
	want := map[string]float64{"p0": 5000, "p1": 5000, "p2": 5000, "p3": 5000}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("p%d", (w+i)%4)
				in := map[string]any{"board": "w", "playerId": p, "score": float64(w + 1), "eventId": fmt.Sprintf("w%d-%d", w, i)}
				for tries := 0; ; tries++ {
					r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": in})
					if len(r.Errors) == 0 {
						break
					}
					if c := r.Codes(); len(c) != 1 || c[0] != "UNAVAILABLE" || tries > 500 {
						t.Errorf("write %v: %+v", in["eventId"], r.Errors)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				mu.Lock()
				want[p] += float64(w + 1)
				mu.Unlock()
			}
		}()
	}
	for k := range 4 {
		time.Sleep(150 * time.Millisecond)
		ids := []string{fmt.Sprintf("seed%d", k), fmt.Sprintf("seed%d", k+4)}
		var n struct{ VoidScoreEvents int }
		s.must(t, testAdminKey, voidMutation, map[string]any{"b": "w", "ids": ids, "r": "probe"}, &n)
		if n.VoidScoreEvents != 2 {
			t.Errorf("voided %d", n.VoidScoreEvents)
		}
		mu.Lock()
		want[fmt.Sprintf("p%d", k%4)] -= 1000
		want[fmt.Sprintf("p%d", (k+4)%4)] -= 1000
		mu.Unlock()
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, window := range []string{"ALL_TIME", "DAILY"} {
		var out struct{ Top []entry }
		s.must(t, "", `query($w: Window) { top(board: "w", window: $w) { playerId score } }`, map[string]any{"w": window}, &out)
		got := map[string]float64{}
		for _, e := range out.Top {
			got[e.PlayerID] = e.Score
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s totals %v, want %v", window, got, want)
		}
	}
	t.Logf("totals %v", want)
}
