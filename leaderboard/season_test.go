package leaderboard_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// seasonStore returns a store with an injected clock set to a moment in year (independent of today's date).
func seasonStore(t *testing.T, tg redistest.Target, year int) (*lb.Store, *testClock) {
	clock := &testClock{}
	clock.Set(time.Date(year, 3, 1, 10, 0, 0, 0, time.UTC))
	return lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now}), clock
}

// sameSeason compares a season with the expected fields (an oracle computed by the test).
func sameSeason(t *testing.T, what string, got *lb.SeasonInfo, id string, start, end time.Time, running bool,
	readable time.Time) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no season, want %s", what, id)
	}
	if got.ID != id || !got.StartedAt.Equal(start) || !got.EndsAt.Equal(end) || got.Running != running ||
		!got.ReadableUntil.Equal(readable) {
		t.Fatalf("%s: %+v, want %s from %v to %v running %v readable until %v", what, *got, id, start, end,
			running, readable)
	}
}

// seasonScores returns player -> score of a SEASON period (explicit id), read with Top.
func seasonScores(t *testing.T, s *lb.Store, board, period string) map[string]float64 {
	t.Helper()
	p, err := s.Top(context.Background(), lb.View{Board: board, Window: lb.Season, Period: period}, 0, 1000)
	if err != nil {
		t.Fatalf("Top(%s): %v", period, err)
	}
	out := map[string]float64{}
	for _, e := range p.Entries {
		out[e.PlayerID] = e.Score
	}
	if int64(len(out)) != p.Size {
		t.Fatalf("Top(%s): %d entries, size %d", period, len(out), p.Size)
	}
	return out
}

func TestSeasonLifecycle(t *testing.T) {
	t.Parallel()
	for _, year := range []int{2026, 2041} {
		for _, tg := range redistest.Targets(t) {
			t.Run(fmt.Sprintf("%d/%s", year, tg.Name), func(t *testing.T) {
				ctx := context.Background()
				s, clock := seasonStore(t, tg, year)
				const grace = 5 * time.Minute
				b := mustBoard(t, s, lb.Board{ID: "league", Windows: []lb.Window{lb.Season, lb.AllTime},
					Grace: grace, Retention: 2})
				readable := func(start, end time.Time) time.Time { return end.Add(grace + 2*end.Sub(start)) }
				season := lb.View{Board: b.ID, Window: lb.Season}
				allTime := lb.View{Board: b.ID, Window: lb.AllTime}

				// No season yet: SEASON has no current period, a submission counts for ALL_TIME only.
				if p, err := s.CurrentPeriod(ctx, b, lb.Season); err != nil || p != lb.NoSeason {
					t.Fatalf("current season before the first: %q %v", p, err)
				}
				if e, err := s.NextReset(ctx, b, lb.Season); err != nil || !e.IsZero() {
					t.Fatalf("next reset before the first season: %v %v", e, err)
				}
				if _, err := s.EndSeason(ctx, b.ID); lb.ErrorCode(err) != lb.NotFound {
					t.Fatalf("end before the first season: %v", err)
				}
				r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "early", Score: 5})
				if r.Window != lb.AllTime || r.Period != lb.AllPeriod || r.Entry.Rank != 1 {
					t.Fatalf("a score with no season ran: reported %s %s rank %d", r.Window, r.Period, r.Entry.Rank)
				}
				if p, err := s.Top(ctx, season, 0, 10); err != nil || p.Period != lb.NoSeason || len(p.Entries) != 0 || p.Size != 0 {
					t.Fatalf("top of the season before the first: %+v %v", p, err)
				}

				// Season s1: a 6-week season ending on a Sunday at 20:00.
				t0 := clock.Now()
				end1 := time.Date(year, 4, 12, 20, 0, 0, 0, time.UTC)
				for end1.Weekday() != time.Sunday {
					end1 = end1.AddDate(0, 0, 1)
				}
				c, err := s.StartSeason(ctx, b.ID, "s1", end1)
				if err != nil {
					t.Fatal(err)
				}
				if !c.Changed || c.Closed != nil {
					t.Fatalf("first start: changed %v closed %+v", c.Changed, c.Closed)
				}
				sameSeason(t, "started s1", &c.Season, "s1", t0, end1, true, readable(t0, end1))
				if p, err := s.CurrentPeriod(ctx, b, lb.Season); err != nil || p != "s1" {
					t.Fatalf("current season %q %v", p, err)
				}
				if e, err := s.NextReset(ctx, b, lb.Season); err != nil || !e.Equal(end1) {
					t.Fatalf("next reset %v %v, want %v", e, err, end1)
				}
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "ann", Score: 10})
				if r.Window != lb.Season || r.Period != "s1" || r.Entry.Rank != 1 || r.Size != 1 {
					t.Fatalf("a score in s1: reported %s %s rank %d size %d", r.Window, r.Period, r.Entry.Rank, r.Size)
				}
				clock.Set(t0.Add(time.Hour))
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "bob", Score: 20})
				// A late score achieved before s1 started does not count for it.
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "pre", Score: 99, AchievedAt: t0.Add(-time.Second)})
				if r.Window != lb.AllTime {
					t.Fatalf("a score achieved before s1 reported %s %s", r.Window, r.Period)
				}
				if got := seasonScores(t, s, b.ID, ""); !equalScores(got, map[string]float64{"ann": 10, "bob": 20}) {
					t.Fatalf("s1: %v", got)
				}

				// Refused starts change nothing.
				before := snapshot(t, s, tg, b.ID)
				for _, bad := range []struct {
					id   string
					ends time.Time
					code lb.Code
				}{
					{"s1", end1.Add(time.Hour), lb.Conflict}, // the running season with another endsAt
					{"", end1, lb.Invalid},
					{"all", end1, lb.Invalid},
					{"ALL", end1, lb.Invalid},
					{fmt.Sprintf("%d-11-29", year), end1, lb.Invalid},
					{fmt.Sprintf("%d-W48", year), end1, lb.Invalid},
					{fmt.Sprintf("%d-11", year), end1, lb.Invalid},
					{"9999-99", end1, lb.Invalid}, // shaped like a month key, though no month
					{"-s", end1, lb.Invalid},
					{"a b", end1, lb.Invalid},
					{"sé", end1, lb.Invalid},
					{"s{1}", end1, lb.Invalid},
					{strings.Repeat("x", lb.MaxSeasonIDBytes+1), end1, lb.Invalid},
					{"s2", clock.Now(), lb.Invalid},                                       // not in the future
					{"s2", clock.Now().Add(lb.MaxSeasonLength + time.Second), lb.Invalid}, // too long
				} {
					if _, err := s.StartSeason(ctx, b.ID, bad.id, bad.ends); lb.ErrorCode(err) != bad.code {
						t.Fatalf("StartSeason(%q, %v): %v, want %s", bad.id, bad.ends, err, bad.code)
					}
				}
				if _, err := s.StartSeason(ctx, "nosuchboard", "s2", end1); lb.ErrorCode(err) != lb.NotFound {
					t.Fatalf("unknown board: %v", err)
				}
				plain := mustBoard(t, s, lb.Board{ID: "plain", Windows: []lb.Window{lb.Daily}})
				if _, err := s.StartSeason(ctx, plain.ID, "s2", end1); lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("a board without SEASON: %v", err)
				}
				// A retry of the start that opened s1 is harmless.
				c, err = s.StartSeason(ctx, b.ID, "s1", end1)
				if err != nil || c.Changed || c.Closed != nil {
					t.Fatalf("retried start: %+v %v", c, err)
				}
				sameSeason(t, "retried s1", &c.Season, "s1", t0, end1, true, readable(t0, end1))
				sameSnapshot(t, "refused and retried starts", before, snapshot(t, s, tg, b.ID))

				// s2 starts early: s1 closes now; scores achieved in s1 still reach it within the grace.
				t1 := t0.Add(2 * time.Hour)
				clock.Set(t1)
				end2 := t1.Add(14 * 24 * time.Hour)
				c, err = s.StartSeason(ctx, b.ID, "s2", end2)
				if err != nil {
					t.Fatal(err)
				}
				sameSeason(t, "started s2", &c.Season, "s2", t1, end2, true, readable(t1, end2))
				sameSeason(t, "closed s1", c.Closed, "s1", t0, t1, false, readable(t0, end1))
				if p, _ := s.CurrentPeriod(ctx, b, lb.Season); p != "s2" {
					t.Fatalf("current season after the start of s2: %q", p)
				}
				if n, _ := s.Size(ctx, season); n != 0 {
					t.Fatalf("s2 starts with %d players", n)
				}
				clock.Set(t1.Add(grace - time.Millisecond)) // the last millisecond of the grace (Board.closedAt)
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "cat", Score: 30, AchievedAt: t1.Add(-time.Second)})
				if r.Window != lb.Season || r.Period != "s1" {
					t.Fatalf("a late score for s1 within the grace landed in %s %s", r.Window, r.Period)
				}
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "dan", Score: 40, AchievedAt: t1})
				if r.Period != "s2" {
					t.Fatalf("a score achieved at the start of s2 landed in %s", r.Period)
				}
				clock.Set(t1.Add(grace + time.Second))
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "eve", Score: 50, AchievedAt: t1.Add(-time.Second)})
				if r.Window != lb.AllTime {
					t.Fatalf("a late score for s1 after the grace landed in %s %s", r.Window, r.Period)
				}
				if got := seasonScores(t, s, b.ID, "s1"); !equalScores(got, map[string]float64{"ann": 10, "bob": 20, "cat": 30}) {
					t.Fatalf("s1 after it closed: %v", got)
				}
				if got := seasonScores(t, s, b.ID, ""); !equalScores(got, map[string]float64{"dan": 40}) {
					t.Fatalf("s2: %v", got)
				}
				if got := seasonScores(t, s, b.ID, "s3"); len(got) != 0 {
					t.Fatalf("a season that never ran: %v", got)
				}
				if n, _ := s.Size(ctx, allTime); n != 7 {
					t.Fatalf("ALL_TIME has %d players, want 7", n)
				}
				if _, err := s.StartSeason(ctx, b.ID, "s1", end2.Add(time.Hour)); lb.ErrorCode(err) != lb.Conflict {
					t.Fatalf("an id used before: %v", err)
				}

				// endSeason ends s2 now; a second call changes nothing; scores then skip SEASON.
				t2 := t1.Add(time.Hour)
				clock.Set(t2)
				c, err = s.EndSeason(ctx, b.ID)
				if err != nil || !c.Changed {
					t.Fatalf("end: %+v %v", c, err)
				}
				sameSeason(t, "ended s2", &c.Season, "s2", t1, t2, false, readable(t1, end2))
				sameSeason(t, "closed s2", c.Closed, "s2", t1, t2, false, readable(t1, end2))
				before = snapshot(t, s, tg, b.ID)
				c, err = s.EndSeason(ctx, b.ID)
				if err != nil || c.Changed || c.Closed != nil {
					t.Fatalf("second end: %+v %v", c, err)
				}
				sameSnapshot(t, "a second endSeason", before, snapshot(t, s, tg, b.ID))
				if p, _ := s.CurrentPeriod(ctx, b, lb.Season); p != "s2" {
					t.Fatalf("current season after the end: %q, want the last one", p)
				}
				if e, err := s.NextReset(ctx, b, lb.Season); err != nil || !e.IsZero() {
					t.Fatalf("next reset while no season runs: %v %v", e, err)
				}
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "fay", Score: 60})
				if r.Window != lb.AllTime {
					t.Fatalf("a score after the end landed in %s %s", r.Window, r.Period)
				}

				// s3 ends by the clock: late scores achieved before its end count until end + grace.
				end3 := t2.Add(24 * time.Hour)
				if _, err := s.StartSeason(ctx, b.ID, "s3", end3); err != nil {
					t.Fatal(err)
				}
				clock.Set(end3.Add(time.Minute))
				if si, _ := s.LatestSeason(ctx, b.ID); si == nil || si.ID != "s3" || si.Running {
					t.Fatalf("s3 after its end: %+v", si)
				}
				if e, _ := s.NextReset(ctx, b, lb.Season); !e.IsZero() {
					t.Fatalf("next reset after s3 ended: %v", e)
				}
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "gus", Score: 70, AchievedAt: end3.Add(-time.Second)})
				if r.Period != "s3" {
					t.Fatalf("a late score for s3 within the grace landed in %s %s", r.Window, r.Period)
				}
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "hal", Score: 80, AchievedAt: end3})
				if r.Window != lb.AllTime {
					t.Fatalf("a score achieved at the end of s3 landed in %s %s", r.Window, r.Period)
				}
				clock.Set(end3.Add(grace + time.Second))
				r = mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "ivy", Score: 90, AchievedAt: end3.Add(-time.Second)})
				if r.Window != lb.AllTime {
					t.Fatalf("a late score for s3 after the grace landed in %s %s", r.Window, r.Period)
				}
				if got := seasonScores(t, s, b.ID, ""); !equalScores(got, map[string]float64{"gus": 70}) {
					t.Fatalf("s3, current after its end: %v", got)
				}

				// Retention: every key of a season expires when it stops being readable (TTLs from the store's
				// clock), and Seasons lists the seasons until then.
				now := clock.Now()
				for _, sc := range []struct {
					id         string
					start, end time.Time
				}{{"s1", t0, end1}, {"s2", t1, end2}, {"s3", t2, end3}} {
					want := readable(sc.start, sc.end)
					n := 0
					for _, k := range boardKeys(t, s, tg, b.ID) {
						if !strings.Contains(k, ":s:"+sc.id) {
							continue
						}
						n++
						ttl := tg.Client.TTL(ctx, k).Val()
						// Written at some moment between the season's start and now: the TTL left on Redis's
						// clock is at most want - start, at least want - now minus the test's own run time.
						if ttl > want.Sub(sc.start) || ttl < want.Sub(now)-time.Minute {
							t.Fatalf("key %s of %s: TTL %v, want about %v", k, sc.id, ttl, want.Sub(now))
						}
					}
					if n == 0 {
						t.Fatalf("no keys of %s", sc.id)
					}
				}
				ids := func() []string {
					all, err := s.Seasons(ctx, b.ID)
					if err != nil {
						t.Fatal(err)
					}
					var out []string
					for _, si := range all {
						out = append(out, si.ID)
					}
					return out
				}
				if got := ids(); !slices.Equal(got, []string{"s1", "s2", "s3"}) {
					t.Fatalf("seasons %v", got)
				}
				// s3 (a day long) is readable for two days after its end plus the grace; s1 and s2 for longer.
				clock.Set(readable(t2, end3).Add(-time.Second))
				if got := ids(); !slices.Equal(got, []string{"s1", "s2", "s3"}) {
					t.Fatalf("seasons just before s3's retention ends %v", got)
				}
				clock.Set(readable(t2, end3))
				if got := ids(); !slices.Equal(got, []string{"s1", "s2"}) {
					t.Fatalf("seasons after s3's retention %v", got)
				}
				clock.Set(readable(t1, end2))
				if got := ids(); !slices.Equal(got, []string{"s1"}) {
					t.Fatalf("seasons after s2's retention %v", got)
				}
			})
		}
	}
}

func equalScores(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A board with only the SEASON window refuses a score no season takes, with nothing written.
func TestSeasonOnlyBoardRefusesScoresBetweenSeasons(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := seasonStore(t, tg, 2031)
		b := mustBoard(t, s, lb.Board{ID: "cup", Windows: []lb.Window{lb.Season}})
		before := snapshot(t, s, tg, b.ID)
		_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: 1, EventID: "e1"})
		if lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("no season: %v", err)
		}
		sameSnapshot(t, "a refused score", before, snapshot(t, s, tg, b.ID))
		// endsAt counts in seconds: a fraction is dropped.
		c, err := s.StartSeason(ctx, b.ID, "cup-1", clock.Now().Add(time.Hour+999*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if want := clock.Now().Add(time.Hour).Truncate(time.Second); !c.Season.EndsAt.Equal(want) {
			t.Fatalf("endsAt %v, want %v", c.Season.EndsAt, want)
		}
		// The refused eventId was not remembered: the same event now counts.
		r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1, EventID: "e1"})
		if r.Duplicate || r.Window != lb.Season || r.Period != "cup-1" || r.Entry.Score != 1 {
			t.Fatalf("after the start: %+v", r)
		}
		// The eventId is remembered for 24 hours, as on an ALL_TIME board: seasons add no period length.
		found := false
		for _, k := range boardKeys(t, s, tg, b.ID) {
			if strings.HasSuffix(k, ":e:e1") {
				found = true
				want := 24 * time.Hour
				if ttl := tg.Client.TTL(ctx, k).Val(); ttl > want || ttl < want-time.Minute {
					t.Fatalf("eventId TTL %v, want %v", ttl, want)
				}
			}
		}
		if !found {
			t.Fatal("no eventId key")
		}
		if _, err := s.EndSeason(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		before = snapshot(t, s, tg, b.ID)
		if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "q", Score: 2}); lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("after the end: %v", err)
		}
		sameSnapshot(t, "a score after the end", before, snapshot(t, s, tg, b.ID))
		// removePlayer reaches closed seasons too.
		if ok, err := s.RemovePlayer(ctx, b.ID, "p"); err != nil || !ok {
			t.Fatalf("remove: %v %v", ok, err)
		}
		if got := seasonScores(t, s, b.ID, "cup-1"); len(got) != 0 {
			t.Fatalf("cup-1 after the removal: %v", got)
		}
	})
}

// Submissions racing with startSeason land wholly in the old or wholly in the new season: every SUM delta is
// counted once in exactly one season (their sum per player is the ALL_TIME total, which the test's own model of
// the deltas sent gives too), the reported season is the one that holds it, in each goroutine (one player's
// submissions in order) no submission after one that landed in the new season lands in the old one, and the old
// season holds the same right after the start returned as at the end.
func TestSeasonStartRacesSubmits(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := seasonStore(t, tg, 2029)
		b := mustBoard(t, s, lb.Board{ID: "race", Mode: lb.Sum, Windows: []lb.Window{lb.Season, lb.AllTime}})
		if _, err := s.StartSeason(ctx, b.ID, "old", clock.Now().Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		clock.Set(clock.Now().Add(time.Hour)) // the new season starts at this instant, and the scores carry it
		const players, each = 6, 60
		type landed struct{ old, new float64 }
		model := make([]landed, players)
		var wg sync.WaitGroup
		var sent atomic.Int64
		atStart := map[string]float64{} // the old season right after the start returned
		start := make(chan struct{})
		errs := make(chan error, players+1)
		for p := range players {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sawNew := false
				for i := range each {
					delta := float64(1 + (p*each+i)%7)
					r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: fmt.Sprint("p", p), Score: delta})
					sent.Add(1)
					if err != nil {
						errs <- err
						return
					}
					switch {
					case r.Window != lb.Season:
						errs <- fmt.Errorf("a score reported %s", r.Window)
						return
					case r.Period == "new":
						sawNew = true
						model[p].new += delta
						if r.Entry.Score != model[p].new {
							errs <- fmt.Errorf("p%d in new: %v, want %v", p, r.Entry.Score, model[p].new)
							return
						}
					case r.Period == "old" && !sawNew:
						model[p].old += delta
						if r.Entry.Score != model[p].old {
							errs <- fmt.Errorf("p%d in old: %v, want %v", p, r.Entry.Score, model[p].old)
							return
						}
					default:
						errs <- fmt.Errorf("p%d: submission %d landed in %q after one in the new season", p, i, r.Period)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for sent.Load() < players*each/3 { // in the middle of the submissions, so both seasons get some
				time.Sleep(100 * time.Microsecond)
			}
			if _, err := s.StartSeason(ctx, b.ID, "new", clock.Now().Add(48*time.Hour)); err != nil {
				errs <- err
				return
			}
			// Once the start returned, the old season takes nothing more (every score carries the instant the
			// new one started): what it holds now is final.
			p, err := s.Top(ctx, lb.View{Board: b.ID, Window: lb.Season, Period: "old"}, 0, 100)
			if err != nil {
				errs <- err
				return
			}
			for _, e := range p.Entries {
				atStart[e.PlayerID] = e.Score
			}
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		oldS, newS := seasonScores(t, s, b.ID, "old"), seasonScores(t, s, b.ID, "new")
		if !equalScores(oldS, atStart) {
			t.Fatalf("the old season changed after the start returned: %v, then %v", atStart, oldS)
		}
		all, err := s.Top(ctx, lb.View{Board: b.ID, Window: lb.AllTime}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for p := range players {
			id := fmt.Sprint("p", p)
			total := 0.0
			for i := range each {
				total += float64(1 + (p*each+i)%7)
			}
			if oldS[id] != model[p].old || newS[id] != model[p].new || model[p].old+model[p].new != total {
				t.Fatalf("%s: old %v new %v, model %+v, total sent %v", id, oldS[id], newS[id], model[p], total)
			}
			var at float64
			for _, e := range all.Entries {
				if e.PlayerID == id {
					at = e.Score
				}
			}
			if at != total {
				t.Fatalf("%s: ALL_TIME %v, want %v", id, at, total)
			}
		}
		var inOld, inNew int
		for _, m := range model {
			if m.old > 0 {
				inOld++
			}
			if m.new > 0 {
				inNew++
			}
		}
		if inOld == 0 || inNew == 0 {
			t.Fatalf("no race: %+v", model) // a third of the submissions were sent before the start
		}
		t.Logf("landed: %+v", model)
	})
}

// The longest season on a board with the longest retention: readable for about 1100 years after its end (beyond
// what a time.Duration holds), and scores land in it.
func TestSeasonLongestRetention(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := seasonStore(t, tg, 2027)
		b := mustBoard(t, s, lb.Board{ID: "forever", Windows: []lb.Window{lb.Season}, Retention: lb.MaxRetention})
		now := clock.Now()
		ends := now.Add(lb.MaxSeasonLength)
		c, err := s.StartSeason(ctx, b.ID, "long", ends)
		if err != nil {
			t.Fatal(err)
		}
		grace := int64(lb.DefaultGrace / time.Second)
		want := time.Unix(ends.Unix()+grace+lb.MaxRetention*(ends.Unix()-now.Unix()), 0).UTC()
		if !c.Season.ReadableUntil.Equal(want) || want.Year() < now.Year()+1000 {
			t.Fatalf("readable until %v, want %v", c.Season.ReadableUntil, want)
		}
		r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1})
		if r.Period != "long" {
			t.Fatalf("landed in %q", r.Period)
		}
		for _, k := range boardKeys(t, s, tg, b.ID) {
			if strings.Contains(k, ":s:long") {
				// In seconds: a time.Duration (go-redis's TTL) cannot hold it.
				ttl, err := tg.Client.Do(ctx, "TTL", k).Int64()
				if left := want.Unix() - now.Unix(); err != nil || ttl > left || ttl < left-60 {
					t.Fatalf("key %s: TTL %d s (%v), want %d", k, ttl, err, left)
				}
			}
		}
	})
}

// Late scores reach the latest two seasons only: a season that closed within the grace of a later start, with
// one more season started since, no longer takes them (the SEASON window skips them; ALL_TIME takes them).
func TestSeasonLateScoresReachTheLatestTwo(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, _ *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := seasonStore(t, tg, 2035)
		b := mustBoard(t, s, lb.Board{ID: "sprint", Windows: []lb.Window{lb.Season, lb.AllTime}, Grace: time.Hour})
		t0 := clock.Now()
		for i, id := range []string{"a", "b", "c"} {
			clock.Set(t0.Add(time.Duration(i) * time.Minute))
			if _, err := s.StartSeason(ctx, b.ID, id, t0.Add(24*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		clock.Set(t0.Add(3 * time.Minute))
		for _, c := range []struct {
			at     time.Duration
			window lb.Window
			period string
		}{
			{90 * time.Second, lb.Season, "b"},  // b ran then and is the one before the latest
			{150 * time.Second, lb.Season, "c"}, // the latest
			{30 * time.Second, lb.AllTime, "all"},
		} {
			r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprint("p", c.at), Score: 1,
				AchievedAt: t0.Add(c.at)})
			if r.Window != c.window || r.Period != c.period {
				t.Fatalf("achieved at +%v: reported %s %s, want %s %s", c.at, r.Window, r.Period, c.window, c.period)
			}
		}
		if got := seasonScores(t, s, b.ID, "a"); len(got) != 0 {
			t.Fatalf("a: %v", got)
		}
	})
}
