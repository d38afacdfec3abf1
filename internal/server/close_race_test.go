package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A close racing with late scores through the server, with the ledger, on a board of one shard and of three:
// the clock crosses end + grace while writers send scores achieved in the day. Every acknowledged score is in the
// close event and in the frozen standings, every refused one (PERIOD_CLOSED, the only refusal allowed) is nowhere,
// ALL_TIME included.
func TestCloseRacesLateScores(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			day := time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC)
			end := day.Add(24 * time.Hour)
			const grace = time.Minute
			clock := &closeClock{t: end.Add(grace - 150*time.Millisecond)}
			cfg := ledgerConfig(t, clock)
			cfg.Closes.CheckInterval = 5 * time.Millisecond
			cfg.Clock = clock.Now
			s := startServer(t, cfg)
			s.create(t, map[string]any{"id": "race", "windows": []string{"DAILY", "ALL_TIME"}, "shards": shards,
				"graceSeconds": 60, "closeEventTop": 1000})
			var ms atomic.Int64
			stop := make(chan struct{})
			var tick sync.WaitGroup
			tick.Add(1)
			go func() { // the clock crosses end + grace, a millisecond every 2 ms
				defer tick.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					if ms.Load() < 400 {
						clock.Set(end.Add(grace - 150*time.Millisecond + time.Duration(ms.Add(1))*time.Millisecond))
					}
				}
			}()
			const writers, each = 4, 40
			var mu sync.Mutex
			accepted := map[string]float64{}
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						p := fmt.Sprintf("w%d-%02d", w, i)
						score := float64(w*1000 + i)
						body, _ := json.Marshal(map[string]any{"query": submitMutation, "variables": map[string]any{"in": map[string]any{
							"board": "race", "playerId": p, "score": score, "eventId": "e-" + p,
							"achievedAt": end.Add(-time.Hour).Format(time.RFC3339)}}})
						r := s.post(t, testSubmitKey, body)
						switch {
						case len(r.Errors) == 0:
							mu.Lock()
							accepted[p] = score
							mu.Unlock()
						case len(r.Errors) == 1 && r.Errors[0].Code() == "PERIOD_CLOSED":
						default:
							t.Errorf("%s: %+v", p, r.Errors)
						}
					}
				}()
			}
			wg.Wait()
			ms.Store(1000)
			clock.Set(end.Add(grace + time.Second))
			close(stop)
			tick.Wait()
			waitUntil(t, 10*time.Second, "the day's close event", func() bool {
				evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "race", "0-0", 10)
				return err == nil && len(evs) == 1
			})
			evs, _ := s.Store.Closes(ctxT(t, 5*time.Second), "race", "0-0", 10)
			ev := evs[0]
			t.Logf("accepted %d of %d", len(accepted), writers*each)
			want := make([]string, 0, len(accepted))
			for p := range accepted {
				want = append(want, p)
			}
			slices.SortFunc(want, func(a, b string) int {
				if accepted[a] > accepted[b] {
					return -1
				}
				return 1
			})
			var got []string
			for _, e := range ev.Top {
				got = append(got, e.PlayerID)
			}
			if ev.Size != int64(len(accepted)) || !slices.Equal(got, want) {
				t.Fatalf("close event size %d top %v; acknowledged %v", ev.Size, got, want)
			}
			var out struct {
				Leaderboard struct{ All int }
			}
			s.must(t, "", `{ leaderboard(id: "race") { all: size(window: ALL_TIME) } }`, nil, &out)
			if out.Leaderboard.All != len(accepted) {
				t.Fatalf("ALL_TIME holds %d players; %d acknowledged", out.Leaderboard.All, len(accepted))
			}
			// From the frozen standings: the same rows.
			clock.Set(end.Add(10 * 24 * time.Hour))
			deletePrefixKeys(t, s)
			var top []string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				r := s.do(t, "", `{ top(board: "race", window: DAILY, period: "2031-03-14", first: 1000) { playerId } }`, nil)
				if len(r.Errors) == 0 {
					var o struct{ Top []struct{ PlayerID string } }
					_ = json.Unmarshal(r.Data, &o)
					for _, e := range o.Top {
						top = append(top, e.PlayerID)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("frozen read: %+v", r.Errors)
				}
			}
			if !slices.Equal(top, want) {
				t.Fatalf("frozen top %v; acknowledged %v", top, want)
			}
		})
	}
}
