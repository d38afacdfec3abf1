package server

import (
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestPeriodsField: Leaderboard.periods through GraphQL: yesterday's DAILY period (written by a store whose clock
// is 24 hours behind) is listed with its size and end (the start of the next day, RFC 3339); ALL_TIME has none; a
// window the board lacks is BAD_USER_INPUT.
func TestPeriodsField(t *testing.T) {
	cfg := testConfig(t)
	now := time.Date(2031, 3, 14, 12, 0, 0, 0, time.UTC) // the server's clock: the test's, not today's
	cfg.Clock = func() time.Time { return now }
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "days", "windows": []string{"DAILY", "ALL_TIME"}})
	yesterday := now.Add(-24 * time.Hour)
	past := leaderboard.New(s.Store.Redis(), leaderboard.Config{Prefix: s.Store.Prefix(),
		PublishCommand: leaderboard.PublishNone, Clock: func() time.Time { return yesterday }})
	for _, p := range []string{"a", "b", "a"} {
		if _, err := past.Submit(ctxT(t, 10*time.Second), leaderboard.Submission{Board: "days", Player: p, Score: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var out struct {
		Leaderboard struct {
			Daily []struct {
				Period  string
				Size    int
				EndedAt string
			}
			All []struct{ Period string }
		}
	}
	s.must(t, "", `{ leaderboard(id: "days") { daily: periods(window: DAILY) { period size endedAt }
		all: periods(window: ALL_TIME) { period } } }`, nil, &out)
	key := yesterday.Format("2006-01-02")
	end := time.Date(yesterday.Year(), yesterday.Month(), yesterday.Day()+1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	found := false
	for _, p := range out.Leaderboard.Daily {
		if p.Period == key {
			found = true
			if p.Size != 2 || p.EndedAt != end {
				t.Fatalf("period %s: size %d, endedAt %s; want 2, %s", key, p.Size, p.EndedAt, end)
			}
		}
	}
	if !found || len(out.Leaderboard.All) != 0 {
		t.Fatalf("periods = %+v; want %s among the DAILY ones and no ALL_TIME one", out.Leaderboard, key)
	}
	s.wantCode(t, "", "BAD_USER_INPUT", `{ leaderboard(id: "days") { periods(window: WEEKLY) { period } } }`, nil)
}
