package leaderboard_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

func TestPeriodsRollOverInLocalTime(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			clock := &testClock{}
			s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
			b := mustBoard(t, s, lb.Board{ID: "periods", Windows: []lb.Window{lb.Daily, lb.Weekly, lb.AllTime},
				TimeZone: "America/New_York"})
			at := func(y int, m time.Month, d, h, min, sec int) time.Time {
				return time.Date(y, m, d, h, min, sec, 0, ny)
			}
			view := func(w lb.Window, p string) lb.View { return lb.View{Board: b.ID, Window: w, Period: p} }
			size := func(v lb.View) int64 {
				n, err := s.Size(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}

			// Saturday 2027-03-13, a minute before local midnight (EST, UTC-5). (Dates are in the future of the real clock,
			// which Redis uses to expire closed periods.)
			clock.Set(at(2027, 3, 13, 23, 59, 0))
			if p := b.Period(lb.Daily, clock.Now()); p != "2027-03-13" {
				t.Fatalf("daily period %q", p)
			}
			if p := b.Period(lb.Weekly, clock.Now()); p != "2027-W10" {
				t.Fatalf("weekly period %q", p)
			}
			r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "sat", Score: 10})
			if r.Period != "2027-03-13" || r.Window != lb.Daily {
				t.Fatalf("result window/period %s %s", r.Window, r.Period)
			}

			// Sunday 00:00:30 local: a new day (still the same ISO week), whose period starts empty.
			clock.Set(at(2027, 3, 14, 0, 0, 30))
			if n := size(view(lb.Daily, "")); n != 0 {
				t.Fatalf("new daily period has %d players", n)
			}
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "sun", Score: 20})
			if got := topIDs(t, s, view(lb.Weekly, ""), 10); !slices.Equal(got, []string{"sun", "sat"}) {
				t.Fatalf("weekly: %v", got)
			}
			if got := topIDs(t, s, view(lb.Daily, "2027-03-13"), 10); !slices.Equal(got, []string{"sat"}) {
				t.Fatalf("yesterday still readable: %v", got)
			}
			// 14 March 2027 is the start of daylight saving time in New York: a 23-hour day.
			end := b.PeriodEnd(lb.Daily, clock.Now())
			if want := time.Date(2027, 3, 15, 4, 0, 0, 0, time.UTC); !end.Equal(want) {
				t.Fatalf("the DST day ends at %v, want %v", end.UTC(), want)
			}

			// Monday 00:03 local (EDT): new day and new week. A score achieved at 23:59 Sunday is inside the grace
			// window and counts for Sunday and week 10.
			clock.Set(at(2027, 3, 15, 0, 3, 0))
			if p := b.Period(lb.Weekly, clock.Now()); p != "2027-W11" {
				t.Fatalf("weekly period after rollover %q", p)
			}
			if n := size(view(lb.Weekly, "")); n != 0 {
				t.Fatalf("new week has %d players", n)
			}
			late := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "late", Score: 30, AchievedAt: at(2027, 3, 14, 23, 59, 0)})
			if late.Period != "2027-03-14" {
				t.Fatalf("late score landed in %q", late.Period)
			}
			if got := topIDs(t, s, view(lb.Daily, "2027-03-14"), 10); !slices.Equal(got, []string{"late", "sun"}) {
				t.Fatalf("Sunday after a late score: %v", got)
			}
			if got := topIDs(t, s, view(lb.Weekly, "2027-W10"), 10); !slices.Equal(got, []string{"late", "sun", "sat"}) {
				t.Fatalf("week 10 after a late score: %v", got)
			}
			if n := size(view(lb.Daily, "")); n != 0 {
				t.Fatalf("the late score leaked into today: %d players", n)
			}
			if e, _ := s.Rank(ctx, view(lb.AllTime, ""), "late"); e == nil || e.UpdatedAt.Unix() != at(2027, 3, 14, 23, 59, 0).Unix() {
				t.Fatalf("updatedAt of the late score: %+v", e)
			}

			// After the grace window the closed period refuses it, and nothing is written anywhere.
			clock.Set(at(2027, 3, 15, 0, 6, 0))
			_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "later", Score: 40, AchievedAt: at(2027, 3, 14, 23, 59, 0)})
			if lb.ErrorCode(err) != lb.PeriodClosed {
				t.Fatalf("after grace: %v", err)
			}
			if e, _ := s.Rank(ctx, view(lb.AllTime, ""), "later"); e != nil {
				t.Fatalf("a refused late score was written to ALL_TIME: %+v", e)
			}
			// A score from the future is bad input.
			_, err = s.Submit(ctx, lb.Submission{Board: b.ID, Player: "future", Score: 1, AchievedAt: clock.Now().Add(time.Hour)})
			if lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("future achievedAt: %v", err)
			}
			// Bad period keys are bad input.
			for _, p := range []string{"2026-13-01", "2026-W54", "yesterday", "2026-11"} {
				if _, err := s.Top(ctx, view(lb.Daily, p), 0, 10); lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("daily period %q: %v", p, err)
				}
			}
		})
	}
}

func TestClosedPeriodsExpire(t *testing.T) {
	t.Parallel()
	tg := redistest.Targets(t)[0]
	ctx := context.Background()
	clock := &testClock{t: time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC)}
	s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
	b := mustBoard(t, s, lb.Board{ID: "retention", Windows: []lb.Window{lb.Daily}, Retention: 2})
	mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1})
	pattern := s.BoardKeys(b.ID)
	keys, err := tg.Client.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The period of 2027-03-10 is kept through the two following days, and the grace window.
	want := time.Date(2027, 3, 13, 0, 5, 0, 0, time.UTC)
	checked := 0
	for _, k := range keys {
		if !containsPeriod(k, "2027-03-10") {
			continue
		}
		exp, err := tg.Client.ExpireTime(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if exp != time.Duration(want.Unix())*time.Second {
			t.Fatalf("%s expires at %v, want %v", k, time.Unix(int64(exp/time.Second), 0).UTC(), want)
		}
		checked++
	}
	if checked < 3 {
		t.Fatalf("only %d period keys found: %v", checked, keys)
	}
}

func containsPeriod(key, period string) bool {
	for i := 0; i+len(period) <= len(key); i++ {
		if key[i:i+len(period)] == period {
			return true
		}
	}
	return false
}

func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"all", "2026-11-29", "2026-W48", "2026-11", "2026-W53", "0000-W01", "2026-02-30", "\xff"} {
		f.Add(s)
	}
	loc, _ := time.LoadLocation("Asia/Kolkata")
	b := lb.Board{TimeZone: "Asia/Kolkata"}
	f.Fuzz(func(t *testing.T, key string) {
		for _, w := range []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly} {
			start, err := lb.ParsePeriod(w, key, loc)
			if err != nil {
				if lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("ParsePeriod(%s, %q): error without code: %v", w, key, err)
				}
				continue
			}
			// A period key that parses names the period that contains its own start.
			if got := b.Period(w, start); got != key {
				t.Fatalf("ParsePeriod(%s, %q) = %v, whose period is %q", w, key, start, got)
			}
		}
	})
}
