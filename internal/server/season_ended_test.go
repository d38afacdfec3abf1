package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A season closed early by endSeason reads the same while Redis holds it, after a FLUSHALL within its
// readability, and from its frozen standings once its keys are gone: by its id and by default (the last season's
// final standings stay the default for reads until the next season starts), on boards of one shard and of three;
// its close event's size and top agree with the reads.
func TestSeasonEndedEarlyReads(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			cfg := ledgerConfig(t, clock)
			cfg.Closes.CheckInterval = 20 * time.Millisecond
			s := startServer(t, cfg)
			s.create(t, map[string]any{"id": "lg", "windows": []string{"SEASON", "ALL_TIME"}, "shards": shards,
				"graceSeconds": 60, "closeEventTop": 100})
			s.must(t, testAdminKey, `mutation($e: Time!) { startSeason(board: "lg", id: "s1", endsAt: $e) { changed } }`,
				map[string]any{"e": ledgerStart.Add(30 * 24 * time.Hour).Format(time.RFC3339)}, nil)
			for i := range 12 {
				clock.Set(ledgerStart.Add(time.Duration(i+1) * time.Minute))
				s.submit(t, map[string]any{"board": "lg", "playerId": fmt.Sprintf("p%d", i), "score": float64(i % 5),
					"displayName": fmt.Sprintf("P%d", i)})
			}
			endAt := ledgerStart.Add(2 * time.Hour)
			clock.Set(endAt)
			s.must(t, testAdminKey, `mutation { endSeason(board: "lg") { changed } }`, nil, nil)
			clock.Set(endAt.Add(2 * time.Minute)) // past the grace: the close event
			waitUntil(t, 10*time.Second, "the season's close event", func() bool {
				evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "lg", "0-0", 10)
				return err == nil && len(evs) == 1
			})
			evs, _ := s.Store.Closes(ctxT(t, 5*time.Second), "lg", "0-0", 10)
			if ev := evs[0]; ev.Period != "s1" || ev.Size != 12 || len(ev.Top) != 12 || ev.Top[0].PlayerID != "p4" {
				t.Fatalf("close event %+v", ev)
			}
			query := `{ byId: top(board: "lg", window: SEASON, period: "s1", first: 100) { ` + entryFields + ` }
				byDefault: top(board: "lg", window: SEASON, first: 100) { ` + entryFields + ` }
				rank(board: "lg", window: SEASON, period: "s1", playerId: "p3") { ` + entryFields + ` }
				rankDefault: rank(board: "lg", window: SEASON, playerId: "p3") { ` + entryFields + ` }
				aroundMe(board: "lg", window: SEASON, playerId: "p7", radius: 2) { playerId rank }
				leaderboard(id: "lg") { currentPeriod(window: SEASON) size(window: SEASON) s1: size(window: SEASON, period: "s1")
					periods(window: SEASON) { period size endedAt } } }`
			read := func(what string) string {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					r := s.do(t, "", query, nil)
					if len(r.Errors) == 0 {
						return string(r.Data)
					}
					if c := r.Codes(); len(c) == 0 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) {
						t.Fatalf("%s: %+v", what, r.Errors)
					}
				}
			}
			held := read("while Redis holds the season")
			if !strings.Contains(held, `"currentPeriod":"s1"`) || strings.Count(held, `"playerId":"p4"`) != 2 {
				t.Fatalf("while Redis holds the season: %s", held)
			}
			deletePrefixKeys(t, s)
			if got := read("after a FLUSHALL"); got != held {
				t.Fatalf("after a FLUSHALL:\n%s\nwhile Redis held the season:\n%s", got, held)
			}
			clock.Set(endAt.Add(400 * 24 * time.Hour)) // past readableUntil
			deletePrefixKeys(t, s)
			if got := read("from the frozen standings"); got != held {
				t.Fatalf("from the frozen standings:\n%s\nwhile Redis held the season:\n%s", got, held)
			}
		})
	}
}
