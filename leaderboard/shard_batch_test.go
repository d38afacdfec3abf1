package leaderboard_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedBatchItemOutcomes: submitScores batches that mix players of every shard with refusals among the items
// (a score that is not finite or beyond 2^53, an achievedAt too old for the grace or in the future, an eventId used
// again with another payload, a SUM delta too small to change the total, an id over 128 bytes, the same player and
// the same eventId twice in one batch): each item gets its own outcome, in input order, the one an unsharded board
// gives, and the accepted items rank as they do there (every field, and every read afterwards).
func TestShardedBatchItemOutcomes(t *testing.T) {
	t.Parallel()
	for _, def := range []lb.Board{
		{ID: "bt-sum", Mode: lb.Sum, Windows: []lb.Window{lb.AllTime, lb.Daily}, Grace: time.Minute},
		{ID: "bt-latest", Mode: lb.Latest, Order: lb.Asc, Windows: []lb.Window{lb.Daily, lb.AllTime}},
		{ID: "bt-best-x", Mode: lb.Best, ExactTop: 3, Windows: []lb.Window{lb.AllTime}},
	} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			clock.Set(time.Date(2031, 5, 6, 23, 59, 30, 0, time.UTC))
			tw := &twins{t: t, s: s, clock: clock, def: def, shards: []int{1, 2, 3, 7}}
			for _, sh := range tw.shards {
				d := def
				d.Shards, d.ID = sh, fmt.Sprintf("%s~%d", def.ID, sh)
				mustBoard(t, s, d)
				tw.ids = append(tw.ids, d.ID)
			}
			ps := twinPlayers(10)
			tw.submitMany([]lb.Submission{{Player: ps[0], Score: 5, EventID: "e0"}, {Player: ps[1], Score: 3},
				{Player: ps[2], Score: 5, DisplayName: ptr("two")}, {Player: ps[3], Score: 1, EventID: "e3"}})
			clock.Set(clock.Now().Add(time.Minute)) // the next day; the last one's grace still open
			long := string(slices.Repeat([]byte("x"), lb.MaxIDBytes+1))
			batch := []lb.Submission{
				{Player: ps[4], Score: 2},
				{Player: ps[5], Score: math.NaN()},
				{Player: ps[0], Score: 6, EventID: "e0"},                                // CONFLICT: another score
				{Player: ps[6], Score: 4, AchievedAt: clock.Now().Add(-25 * time.Hour)}, // its day closed
				{Player: ps[7], Score: lb.MaxScore * 2},
				{Player: ps[3], Score: 1, EventID: "e3"},                                  // retry: the first result
				{Player: ps[8], Score: 3, AchievedAt: clock.Now().Add(-40 * time.Second)}, // within the grace
				{Player: long, Score: 1},
				{Player: ps[1], Score: 1e-300}, // SUM: too small a delta
				{Player: ps[2], Score: 5, Metadata: json.RawMessage(`{"k":1}`)},
				{Player: ps[9], Score: 5, EventID: "dup"},
				{Player: ps[9], Score: 5, EventID: "dup"},                         // the same eventId again in the batch
				{Player: ps[4], Score: 7},                                         // the same player again
				{Player: ps[5], Score: 2, AchievedAt: clock.Now().Add(time.Hour)}, // in the future
				{Player: ps[1], Score: -2, EventID: "neg"},
			}
			var codes []string
			for _, o := range tw.submitMany(batch) {
				codes = append(codes, errCode(o.Err))
			}
			// The refusals the batch is made of (the SUM board's; the others differ where their mode does).
			if def.Mode == lb.Sum {
				want := []string{"", "BAD_USER_INPUT", "CONFLICT", "PERIOD_CLOSED", "BAD_USER_INPUT", "", "",
					"BAD_USER_INPUT", "BAD_USER_INPUT", "", "", "", "", "BAD_USER_INPUT", ""}
				if !slices.Equal(codes, want) {
					t.Fatalf("outcomes %q, want %q", codes, want)
				}
			}
			tw.submitMany(batch) // all again: retries and conflicts
			now := clock.Now()
			tw.check(lb.AllTime, "", append(slices.Clone(ps), "absent"))
			if slices.Contains(def.Windows, lb.Daily) {
				tw.check(lb.Daily, now.Format("2006-01-02"), append(slices.Clone(ps), "absent"))
				tw.check(lb.Daily, now.Add(-24*time.Hour).Format("2006-01-02"), append(slices.Clone(ps), "absent"))
			}
		})
	}
}

// TestShardedSeasonOnlyTwins: a board whose only window is SEASON (SUM, LATEST ASC): scores while
// no season runs are PERIOD_CLOSED on every shard as on the unsharded board, eventIds and removals inside a
// season, a season ended and another started; each season reads as the unsharded board's.
func TestShardedSeasonOnlyTwins(t *testing.T) {
	t.Parallel()
	for _, def := range []lb.Board{
		{ID: "so-sum", Mode: lb.Sum, Windows: []lb.Window{lb.Season}},
		{ID: "so-latest", Mode: lb.Latest, Order: lb.Asc, Windows: []lb.Window{lb.Season}},
	} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			tw := &twins{t: t, s: s, clock: clock, def: def, shards: []int{1, 2, 5}}
			for _, sh := range tw.shards {
				d := def
				d.Shards, d.ID = sh, fmt.Sprintf("%s~%d", def.ID, sh)
				mustBoard(t, s, d)
				tw.ids = append(tw.ids, d.ID)
			}
			ps := twinPlayers(9)
			tick := func() { clock.Set(clock.Now().Add(time.Second)) }
			tw.submit(lb.Submission{Player: ps[0], Score: 1}) // no season: PERIOD_CLOSED
			tw.season("s1", clock.Now().Add(time.Hour))
			for i, p := range ps {
				tick()
				tw.submit(lb.Submission{Player: p, Score: float64(i % 4), EventID: "a-" + p})
			}
			tick()
			tw.submitMany([]lb.Submission{{Player: ps[1], Score: 2, EventID: "a-" + ps[1]}, // retry
				{Player: ps[2], Score: 3, EventID: "a-" + ps[2]}, // another score: CONFLICT
				{Player: ps[3], Score: -1}, {Player: ps[3], Score: 5, EventID: "b"}})
			tw.remove(ps[4])
			tick()
			tw.season("", time.Time{})
			tw.submit(lb.Submission{Player: ps[5], Score: 9}) // ended: PERIOD_CLOSED
			tw.season("s2", clock.Now().Add(time.Hour))
			for i, p := range ps[:5] {
				tick()
				tw.submit(lb.Submission{Player: p, Score: float64(3 - i%3), EventID: "a-" + p}) // s1's: duplicates
				tw.submit(lb.Submission{Player: p, Score: float64(3 - i%3), EventID: "c-" + p})
			}
			for _, season := range []string{"s1", "s2"} {
				tw.check(lb.Season, season, append(slices.Clone(ps), "absent"))
			}
		})
	}
}
