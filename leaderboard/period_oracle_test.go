package leaderboard_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// oracleZones are the time zones the period rules are checked in: daylight saving that starts at local midnight
// (Santiago, Havana, Azores), a 30-minute shift (Lord Howe), a 45-minute offset (Chatham), a half-hour offset,
// classic DST zones, and zones without DST.
var oracleZones = []string{"America/Santiago", "America/Havana", "Atlantic/Azores", "Australia/Lord_Howe",
	"Pacific/Chatham", "America/St_Johns", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "UTC"}

func loadZones(tb testing.TB) []*time.Location {
	tb.Helper()
	out := make([]*time.Location, len(oracleZones))
	for i, z := range oracleZones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = loc
	}
	return out
}

// periodOracle computes period keys, starts and ends without the package's code: keys from the local calendar
// date of an instant (ISO weeks from day numbers), starts and ends by searching the instants where the key
// changes. Only the zone conversion (time.Time.In) is shared with the package.
type periodOracle struct{ loc *time.Location }

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's algorithm).
func daysFromCivil(y, m, d int) int {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func civilFromDays(z int) (y, m, d int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func (o periodOracle) key(w lb.Window, t time.Time) string {
	y, mo, d := t.In(o.loc).Date()
	switch w {
	case lb.Daily:
		return fmt.Sprintf("%04d-%02d-%02d", y, int(mo), d)
	case lb.Monthly:
		return fmt.Sprintf("%04d-%02d", y, int(mo))
	case lb.Weekly:
		days := daysFromCivil(y, int(mo), d)
		wd := ((days+3)%7 + 7) % 7 // 1970-01-01 was a Thursday; Monday = 0
		thu := days - wd + 3       // the ISO week belongs to the year of its Thursday
		ty, _, _ := civilFromDays(thu)
		return fmt.Sprintf("%04d-W%02d", ty, (thu-daysFromCivil(ty, 1, 1))/7+1)
	}
	return lb.AllPeriod
}

// change returns the first instant after from (stepping by step, forward or backward) whose key differs from
// from's, refined to the second. Periods last at least 23 hours, so a 3-hour step never skips one.
func (o periodOracle) change(w lb.Window, from time.Time, step time.Duration) time.Time {
	k := o.key(w, from)
	prev, cur := from, from.Add(step)
	for o.key(w, cur) == k {
		prev, cur = cur, cur.Add(step)
	}
	// prev has key k, cur does not: bisect in whole seconds.
	a, b := prev.Unix(), cur.Unix()
	for a-b > 1 || b-a > 1 {
		mid := a + (b-a)/2
		if o.key(w, time.Unix(mid, 0)) == k {
			a = mid
		} else {
			b = mid
		}
	}
	return time.Unix(b, 0)
}

// end is the first instant of the next period; start is the first instant of t's period.
func (o periodOracle) end(w lb.Window, t time.Time) time.Time { return o.change(w, t, 3*time.Hour) }
func (o periodOracle) start(w lb.Window, t time.Time) time.Time {
	return o.change(w, t, -3*time.Hour).Add(time.Second)
}

// checkPeriodAt compares every period rule at instant t with the oracle.
func checkPeriodAt(t *testing.T, loc *time.Location, at time.Time) {
	t.Helper()
	o := periodOracle{loc}
	b := lb.Board{TimeZone: loc.String()}
	for _, w := range []lb.Window{lb.Daily, lb.Weekly, lb.Monthly} {
		key := b.Period(w, at)
		if want := o.key(w, at); key != want {
			t.Fatalf("%s %s at %v: period %q, oracle %q", loc, w, at.In(loc), key, want)
		}
		if end, want := b.PeriodEnd(w, at), o.end(w, at); !end.Equal(want) || !end.After(at) {
			t.Fatalf("%s %s at %v: period ends %v, oracle %v", loc, w, at.In(loc), end.In(loc), want.In(loc))
		}
		start, err := lb.ParsePeriod(w, key, loc)
		if err != nil {
			t.Fatalf("%s %s: own period key %q refused: %v", loc, w, key, err)
		}
		if want := o.start(w, at); !start.Equal(want) {
			t.Fatalf("%s %s at %v: period %s starts %v, oracle %v", loc, w, at.In(loc), key, start.In(loc), want.In(loc))
		}
	}
}

// interestingDays returns the local dates of loc worth checking between two dates: every day whose length is not
// 24 hours (a clock change), and the days around the year boundaries, ISO week 53 of 2026 and 29 February 2028.
func interestingDays(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
		y, m, day := d.Date()
		noon := time.Date(y, m, day, 12, 0, 0, 0, loc)
		if time.Date(y, m, day+1, 12, 0, 0, 0, loc).Sub(noon) != 24*time.Hour ||
			noon.Sub(time.Date(y, m, day-1, 12, 0, 0, 0, loc)) != 24*time.Hour {
			out = append(out, noon)
		}
	}
	for _, c := range [][3]int{{2026, 12, 27}, {2026, 12, 31}, {2027, 1, 1}, {2027, 1, 3}, {2027, 1, 4}, {2028, 2, 28},
		{2028, 2, 29}, {2028, 3, 1}, {2027, 12, 31}, {2028, 1, 1}} {
		out = append(out, time.Date(c[0], time.Month(c[1]), c[2], 12, 0, 0, 0, loc))
	}
	return out
}

// TestPeriodsMatchOracle checks period keys, starts (ParsePeriod of the key) and ends against the oracle around
// every clock change of 2026-2028 in every oracle zone, at the first and last seconds of each day and in between.
func TestPeriodsMatchOracle(t *testing.T) {
	t.Parallel()
	for _, loc := range loadZones(t) {
		t.Run(loc.String(), func(t *testing.T) {
			t.Parallel()
			o := periodOracle{loc}
			days := interestingDays(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
			for _, noon := range days {
				first := o.start(lb.Daily, noon)
				next := o.end(lb.Daily, noon)
				for _, at := range []time.Time{first.Add(-time.Second), first, first.Add(time.Second),
					first.Add(90 * time.Minute), noon, next.Add(-time.Second)} {
					checkPeriodAt(t, loc, at)
				}
			}
		})
	}
}

// The days whose midnight falls into a daylight-saving gap (as the issue reported them): the day is filed under its
// own date, its key is accepted, its start is the end of the gap, and the previous day ends there.
func TestMidnightGapDays(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone string
		day  string
	}{{"America/Santiago", "2027-09-05"}, {"America/Havana", "2027-03-14"}, {"Atlantic/Azores", "2027-03-28"}} {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := time.Parse("2006-01-02", c.day)
		if m := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc); m.Format("2006-01-02") == c.day {
			t.Fatalf("%s: midnight of %s exists in this time zone database; the case tests nothing", c.zone, c.day)
		}
		start, err := lb.ParsePeriod(lb.Daily, c.day, loc)
		if err != nil {
			t.Fatalf("%s: own key %s refused: %v", c.zone, c.day, err)
		}
		if l := start.In(loc); l.Format("2006-01-02 15:04") != c.day+" 01:00" {
			t.Fatalf("%s: %s starts at %v, want 01:00 local (the end of the gap)", c.zone, c.day, l)
		}
		b := lb.Board{TimeZone: c.zone}
		if p := b.Period(lb.Daily, start); p != c.day {
			t.Fatalf("%s: the first instant of %s is filed under %s", c.zone, c.day, p)
		}
		if end := b.PeriodEnd(lb.Daily, start.Add(-time.Minute)); !end.Equal(start) {
			t.Fatalf("%s: the day before %s ends %v, want %v", c.zone, c.day, end, start)
		}
		checkPeriodAt(t, loc, start)
	}
}

// On a midnight-gap day the store files scores under the day itself, nextReset of the day before is that day's
// first instant, and a late score inside the grace window still counts for the day before.
func TestMidnightGapDaysInTheStore(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		for _, c := range []struct{ zone, day, before string }{{"America/Santiago", "2027-09-05", "2027-09-04"},
			{"America/Havana", "2027-03-14", "2027-03-13"}, {"Atlantic/Azores", "2027-03-28", "2027-03-27"}} {
			t.Run(tg.Name+"/"+c.zone, func(t *testing.T) {
				loc, _ := time.LoadLocation(c.zone)
				start, err := lb.ParsePeriod(lb.Daily, c.day, loc)
				if err != nil {
					t.Fatal(err)
				}
				clock := &testClock{t: start.Add(-10 * time.Minute)}
				s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
				b := mustBoard(t, s, lb.Board{ID: "gap", TimeZone: c.zone, Windows: []lb.Window{lb.Daily, lb.Weekly, lb.Monthly}})
				if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "eve", Score: 1}); r.Period != c.before {
					t.Fatalf("before the gap: period %s, want %s", r.Period, c.before)
				}
				if next := b.PeriodEnd(lb.Daily, clock.Now()); !next.Equal(start) || !next.After(clock.Now()) {
					t.Fatalf("nextReset %v, want %v", next, start)
				}
				clock.Set(start.Add(2 * time.Minute))
				if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "dawn", Score: 2}); r.Period != c.day {
					t.Fatalf("on the gap day: period %s, want %s", r.Period, c.day)
				}
				late := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "late", Score: 3, AchievedAt: start.Add(-time.Minute)})
				if late.Period != c.before {
					t.Fatalf("a late score inside the grace window went to %s, want %s", late.Period, c.before)
				}
				for day, want := range map[string][]string{c.before: {"late", "eve"}, c.day: {"dawn"}} {
					if got := topIDs(t, s, lb.View{Board: b.ID, Window: lb.Daily, Period: day}, 10); !slices.Equal(got, want) {
						t.Fatalf("%s: %v, want %v", day, got, want)
					}
				}
				if got := topIDs(t, s, lb.View{Board: b.ID, Window: lb.Daily}, 10); !slices.Equal(got, []string{"dawn"}) {
					t.Fatalf("the current day: %v", got)
				}
			})
		}
	}
}

// FuzzPeriodKeys checks the period rules at arbitrary instants of 2000-2100 in the oracle zones.
func FuzzPeriodKeys(f *testing.F) {
	zones := loadZones(f)
	for _, s := range []string{"2027-09-05T04:00:00Z", "2027-03-14T05:00:00Z", "2027-03-28T01:00:00Z",
		"2026-10-04T15:00:00Z", "2027-04-03T14:45:00Z", "2026-12-31T23:59:59Z", "2028-02-29T12:00:00Z", "2027-01-03T10:00:00Z"} {
		at, _ := time.Parse(time.RFC3339, s)
		for i := range zones {
			f.Add(at.Unix(), uint8(i))
		}
	}
	lo, hi := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	f.Fuzz(func(t *testing.T, unix int64, zone uint8) {
		if unix < lo || unix >= hi {
			unix = lo + ((unix%(hi-lo))+(hi-lo))%(hi-lo)
		}
		checkPeriodAt(t, zones[int(zone)%len(zones)], time.Unix(unix, 0))
	})
}
