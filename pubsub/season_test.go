package pubsub

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// nextTop returns the next top update, failing after within.
func nextTop(t *testing.T, ch <-chan *TopUpdate, within time.Duration) *TopUpdate {
	t.Helper()
	select {
	case u, ok := <-ch:
		if !ok {
			t.Fatal("top channel closed")
		}
		return u
	case <-time.After(within):
		t.Fatal("no top update")
	}
	return nil
}

// TestSeasonRollover: subscriptions that follow the SEASON window move to a new season when it starts and get a
// snapshot of it (rank subscriptions a rank 0), also when another store (another process) started it: the hub
// learns it from Redis; when the season ends by the clock or by EndSeason, followers get a snapshot of its final
// standings; a subscription to an explicit season stays on it.
func TestSeasonRollover(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			var now atomic.Int64
			t0 := time.Date(2030, 6, 2, 12, 0, 0, 0, time.UTC)
			now.Store(t0.UnixNano())
			cfg := leaderboard.Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return time.Unix(0, now.Load()) }}
			st := leaderboard.New(tg.Client, cfg)
			admin := leaderboard.New(tg.Client, cfg) // another process's store: this hub never hears of its calls
			h := startHub(t, st, Config{PeriodCheck: 20 * time.Millisecond})
			createBoard(t, st, leaderboard.Board{ID: "league", Windows: []leaderboard.Window{leaderboard.Season}})
			ctx := context.Background()
			// Subscribed before the first season: an empty list of no season, then s1 when it starts.
			ch, err := h.SubscribeTop(t.Context(), leaderboard.View{Board: "league"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if u := nextTop(t, ch, 2*time.Second); !u.Snapshot || u.Period != leaderboard.NoSeason || len(u.Entries) != 0 {
				t.Fatalf("before the first season: %+v", u)
			}
			if _, err := admin.StartSeason(ctx, "league", "s1", t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if u := nextTop(t, ch, 3*time.Second); !u.Snapshot || u.Period != "s1" || len(u.Entries) != 0 || u.Version != 2 {
				t.Fatalf("at the first season: %+v", u)
			}
			pinned, err := h.SubscribeTop(t.Context(), leaderboard.View{Board: "league", Period: "s1"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := h.SubscribeRank(t.Context(), leaderboard.View{Board: "league"}, "a")
			if err != nil {
				t.Fatal(err)
			}
			submit(t, st, "league", "a", 5)
			for e := nextEntry(t, rc, 2*time.Second); e.Rank != 1; e = nextEntry(t, rc, 2*time.Second) {
				if e.Rank != 0 {
					t.Fatalf("got %+v", e)
				}
			}
			var last *TopUpdate
			for last == nil || len(last.Entries) == 0 {
				last = nextTop(t, ch, 2*time.Second)
			}
			if last.Period != "s1" || last.Entries[0].PlayerID != "a" {
				t.Fatalf("got %+v", last)
			}
			for u := nextTop(t, pinned, 2*time.Second); len(u.Entries) == 0; u = nextTop(t, pinned, 2*time.Second) {
			}

			// Another process starts s2: the followers move to it with an empty snapshot, the pinned one stays.
			if _, err := admin.StartSeason(ctx, "league", "s2", t0.Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			u := nextTop(t, ch, 3*time.Second)
			if !u.Snapshot || u.Period != "s2" || len(u.Entries) != 0 || u.Size != 0 || u.Version != last.Version+1 {
				t.Fatalf("got %+v, want an empty snapshot of s2 with version %d", u, last.Version+1)
			}
			if e := nextEntry(t, rc, 2*time.Second); e.Rank != 0 {
				t.Fatalf("got %+v, want rank 0 in the new season", e)
			}
			submit(t, st, "league", "b", 9)
			u = nextTop(t, ch, 2*time.Second)
			if u.Period != "s2" || len(u.Entries) != 1 || u.Entries[0].PlayerID != "b" || u.Size != 1 {
				t.Fatalf("got %+v", u)
			}
			last = u

			// s2 reaches its endsAt: a snapshot of its final standings.
			now.Store(t0.Add(2 * time.Hour).UnixNano())
			u = nextTop(t, ch, 3*time.Second)
			if !u.Snapshot || u.Period != "s2" || len(u.Entries) != 1 || u.Entries[0].PlayerID != "b" ||
				u.Version != last.Version+1 {
				t.Fatalf("got %+v, want a snapshot of s2's final standings", u)
			}
			last = u

			// s3 started and ended through this hub's process (SeasonChanged), then through another.
			if _, err := st.StartSeason(ctx, "league", "s3", t0.Add(5*time.Hour)); err != nil {
				t.Fatal(err)
			}
			h.SeasonChanged("league")
			u = nextTop(t, ch, 3*time.Second)
			if !u.Snapshot || u.Period != "s3" || len(u.Entries) != 0 || u.Version != last.Version+1 {
				t.Fatalf("got %+v, want an empty snapshot of s3", u)
			}
			submit(t, st, "league", "c", 1)
			for u = nextTop(t, ch, 2*time.Second); len(u.Entries) == 0; u = nextTop(t, ch, 2*time.Second) {
			}
			last = u
			if _, err := admin.EndSeason(ctx, "league"); err != nil {
				t.Fatal(err)
			}
			u = nextTop(t, ch, 3*time.Second)
			if !u.Snapshot || u.Period != "s3" || len(u.Entries) != 1 || u.Entries[0].PlayerID != "c" ||
				u.Version != last.Version+1 {
				t.Fatalf("got %+v, want a snapshot of s3's final standings", u)
			}
			// The pinned subscription never left s1 and got nothing else: a's entry still there.
			select {
			case u := <-pinned:
				if u.Period != "s1" {
					t.Fatalf("pinned subscription got %+v", u)
				}
			default:
			}
		})
	}
}
