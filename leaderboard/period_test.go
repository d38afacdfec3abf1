package leaderboard_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// farYears are the years the period tests run in. Redis's own clock never matters to them (period keys get TTLs
// relative to the store's clock), so they pass whatever date the machine shows; running them in several years
// shows that nothing else ties them to one.
var farYears = []int{2026, 2033, 2040}

// springForward returns the Sunday in March of year y on which loc's clocks go forward (a 23-hour day), found
// from the zone itself.
func springForward(t *testing.T, y int, loc *time.Location) time.Time {
	t.Helper()
	for d := 1; d <= 31; d++ {
		noon := time.Date(y, 3, d, 12, 0, 0, 0, loc)
		if noon.Sub(time.Date(y, 3, d-1, 12, 0, 0, 0, loc)) == 23*time.Hour {
			return noon
		}
	}
	t.Fatalf("no daylight-saving start in March %d in %s", y, loc)
	return time.Time{}
}

func TestPeriodsRollOverInLocalTime(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, year := range farYears {
		for _, tg := range redistest.Targets(t) {
			t.Run(fmt.Sprintf("%d/%s", year, tg.Name), func(t *testing.T) {
				ctx := context.Background()
				sun := springForward(t, year, ny) // a Sunday, the 23-hour day
				sy, sm, sd := sun.Date()
				at := func(day, h, min, sec int) time.Time { return time.Date(sy, sm, sd+day, h, min, sec, 0, ny) }
				key := func(day int) string { return at(day, 12, 0, 0).Format("2006-01-02") }
				week := func(day int) string {
					y, w := at(day, 12, 0, 0).ISOWeek()
					return fmt.Sprintf("%04d-W%02d", y, w)
				}
				clock := &testClock{}
				s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
				b := mustBoard(t, s, lb.Board{ID: "periods", Windows: []lb.Window{lb.Daily, lb.Weekly, lb.AllTime},
					TimeZone: "America/New_York"})
				view := func(w lb.Window, p string) lb.View { return lb.View{Board: b.ID, Window: w, Period: p} }
				size := func(v lb.View) int64 {
					n, err := s.Size(ctx, v)
					if err != nil {
						t.Fatal(err)
					}
					return n
				}

				// Saturday, a minute before local midnight (EST, UTC-5).
				clock.Set(at(-1, 23, 59, 0))
				if p := b.Period(lb.Daily, clock.Now()); p != key(-1) {
					t.Fatalf("daily period %q, want %q", p, key(-1))
				}
				if p := b.Period(lb.Weekly, clock.Now()); p != week(-1) {
					t.Fatalf("weekly period %q, want %q", p, week(-1))
				}
				r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "sat", Score: 10})
				if r.Period != key(-1) || r.Window != lb.Daily {
					t.Fatalf("result window/period %s %s", r.Window, r.Period)
				}

				// Sunday 00:00:30 local: a new day (still the same ISO week), whose period starts empty.
				clock.Set(at(0, 0, 0, 30))
				if n := size(view(lb.Daily, "")); n != 0 {
					t.Fatalf("new daily period has %d players", n)
				}
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "sun", Score: 20})
				if got := topIDs(t, s, view(lb.Weekly, ""), 10); !slices.Equal(got, []string{"sun", "sat"}) {
					t.Fatalf("weekly: %v", got)
				}
				if got := topIDs(t, s, view(lb.Daily, key(-1)), 10); !slices.Equal(got, []string{"sat"}) {
					t.Fatalf("yesterday still readable: %v", got)
				}
				// The daylight-saving day has 23 hours: it ends at Monday 00:00 EDT, 04:00 UTC.
				end := b.PeriodEnd(lb.Daily, clock.Now())
				if want := time.Date(sy, sm, sd+1, 4, 0, 0, 0, time.UTC); !end.Equal(want) {
					t.Fatalf("the DST day ends at %v, want %v", end.UTC(), want)
				}

				// Monday 00:03 local (EDT): new day and new week. A score achieved at 23:59 Sunday is inside the
				// grace window and counts for Sunday and the week before.
				clock.Set(at(1, 0, 3, 0))
				if p := b.Period(lb.Weekly, clock.Now()); p != week(1) || p == week(0) {
					t.Fatalf("weekly period after rollover %q, want %q", p, week(1))
				}
				if n := size(view(lb.Weekly, "")); n != 0 {
					t.Fatalf("new week has %d players", n)
				}
				late := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "late", Score: 30, AchievedAt: at(0, 23, 59, 0)})
				if late.Period != key(0) {
					t.Fatalf("late score landed in %q", late.Period)
				}
				if got := topIDs(t, s, view(lb.Daily, key(0)), 10); !slices.Equal(got, []string{"late", "sun"}) {
					t.Fatalf("Sunday after a late score: %v", got)
				}
				if got := topIDs(t, s, view(lb.Weekly, week(0)), 10); !slices.Equal(got, []string{"late", "sun", "sat"}) {
					t.Fatalf("the week after a late score: %v", got)
				}
				if n := size(view(lb.Daily, "")); n != 0 {
					t.Fatalf("the late score leaked into today: %d players", n)
				}
				if e, _ := s.Rank(ctx, view(lb.AllTime, ""), "late"); e == nil || e.UpdatedAt.Unix() != at(0, 23, 59, 0).Unix() {
					t.Fatalf("updatedAt of the late score: %+v", e)
				}

				// After the grace window the closed period refuses it, and nothing is written anywhere.
				clock.Set(at(1, 0, 6, 0))
				_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "later", Score: 40, AchievedAt: at(0, 23, 59, 0)})
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
				for _, p := range []string{fmt.Sprintf("%d-13-01", year), fmt.Sprintf("%d-W54", year), "yesterday",
					fmt.Sprintf("%d-11", year)} {
					if _, err := s.Top(ctx, view(lb.Daily, p), 0, 10); lb.ErrorCode(err) != lb.Invalid {
						t.Fatalf("daily period %q: %v", p, err)
					}
				}
				// Every key written is alive, with a TTL measured from the store's clock.
				for _, k := range boardKeys(t, s, tg, b.ID) {
					ttl, err := tg.Client.TTL(ctx, k).Result()
					if err != nil || ttl == -2 {
						t.Fatalf("key %s: ttl %v %v", k, ttl, err)
					}
				}
			})
		}
	}
}

// Closed periods expire after their retention and grace, measured from the store's clock: the keys of a period
// get a TTL, never an absolute expiry time that Redis's clock could have passed already. The clocks here lie
// before, near and long after the machine's date.
func TestClosedPeriodsExpire(t *testing.T) {
	t.Parallel()
	tg := redistest.Targets(t)[0]
	ctx := context.Background()
	for _, base := range []time.Time{time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Second),
		time.Date(2033, 3, 10, 12, 0, 0, 0, time.UTC), time.Date(2040, 12, 30, 12, 0, 0, 0, time.UTC)} {
		t.Run(base.Format("2006-01-02"), func(t *testing.T) {
			clock := &testClock{t: base}
			s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
			b := mustBoard(t, s, lb.Board{ID: "retention", Windows: []lb.Window{lb.Daily}, Retention: 2})
			r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1})
			// The period is kept through the two following days, and the grace window (5 minutes).
			y, m, d := base.Date()
			want := time.Date(y, m, d+3, 0, 5, 0, 0, time.UTC).Sub(base)
			checked := 0
			for _, k := range boardKeys(t, s, tg, b.ID) {
				if !strings.Contains(k, r.Period) {
					continue
				}
				ttl, err := tg.Client.TTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if ttl > want || ttl < want-5*time.Second {
					t.Fatalf("%s: TTL %v, want %v", k, ttl, want)
				}
				checked++
			}
			if checked < 3 {
				t.Fatalf("only %d period keys found", checked)
			}
			if got := topIDs(t, s, lb.View{Board: b.ID}, 10); !slices.Equal(got, []string{"p"}) {
				t.Fatalf("top: %v", got)
			}
			// A long grace window feeds periods older than the retention; their keys are written alive.
			long := mustBoard(t, s, lb.Board{ID: "long-grace", Windows: []lb.Window{lb.Daily}, Retention: 1, Grace: 72 * time.Hour})
			for day, want := range map[int]lb.Code{-1: "", -2: "", -3: "", -4: lb.PeriodClosed} {
				_, err := s.Submit(ctx, lb.Submission{Board: long.ID, Player: fmt.Sprint("d", day), Score: 1,
					AchievedAt: base.AddDate(0, 0, day)})
				if lb.ErrorCode(err) != want {
					t.Fatalf("achieved %d days ago: %v, want %q", -day, err, want)
				}
			}
			for _, k := range boardKeys(t, s, tg, long.ID) {
				if ttl, _ := tg.Client.TTL(ctx, k).Result(); ttl == -2 || ttl == 0 {
					t.Fatalf("key %s written already expired", k)
				}
			}
		})
	}
}

func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"all", "2026-11-29", "2026-W48", "2026-11", "2026-W53", "0000-W01", "2026-02-30", "\xff",
		"2027-09-05", "2027-03-14", "2028-02-29", "2027-W53", "+026-W01", "2026-W1 "} {
		f.Add(s)
	}
	zones := loadZones(f)
	f.Fuzz(func(t *testing.T, key string) {
		for _, z := range zones {
			b := lb.Board{TimeZone: z.String()}
			for _, w := range []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly} {
				start, err := lb.ParsePeriod(w, key, z)
				if err != nil {
					if lb.ErrorCode(err) != lb.Invalid {
						t.Fatalf("ParsePeriod(%s, %q): error without code: %v", w, key, err)
					}
					continue
				}
				// A period key that parses names the period that contains its own start, which is its first instant.
				if got := b.Period(w, start); got != key {
					t.Fatalf("%s: ParsePeriod(%s, %q) = %v, whose period is %q", z, w, key, start, got)
				}
				if w != lb.AllTime && b.Period(w, start.Add(-time.Second)) == key {
					t.Fatalf("%s: ParsePeriod(%s, %q) = %v is not the first instant of the period", z, w, key, start)
				}
			}
		}
	})
}
