package leaderboard

import (
	"fmt"
	"strconv"
	"time"
)

// AllPeriod is the period key of the ALL_TIME window.
const AllPeriod = "all"

// windowCodes are the one-letter names of windows inside Redis keys.
var windowCodes = map[Window]string{AllTime: "a", Daily: "d", Weekly: "w", Monthly: "m", Season: "s"}

// A period is a run of local calendar days: a day, an ISO week (Monday to Sunday) or a month of the board's time
// zone. It starts at the first instant of its first day that exists on the local clock: local midnight, or on a
// day whose midnight falls into a daylight-saving gap (America/Santiago, America/Havana, Atlantic/Azores), the end
// of the gap. Keys are the local dates: an instant belongs to the period of its own local date.

// civil is a local calendar date.
type civil struct {
	y int
	m time.Month
	d int
}

func dateOf(t time.Time) civil {
	y, m, d := t.Date()
	return civil{y, m, d}
}

// norm normalizes a date whose day or month overflowed (day 0, day 32, month 13...).
func (c civil) norm() civil { return dateOf(time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC)) }

func (c civil) before(o civil) bool {
	if c.y != o.y {
		return c.y < o.y
	}
	if c.m != o.m {
		return c.m < o.m
	}
	return c.d < o.d
}

// dayStart returns the first instant of local date c in loc.
func dayStart(c civil, loc *time.Location) time.Time {
	c = c.norm()
	t := time.Date(c.y, c.m, c.d, 0, 0, 0, 0, loc)
	if dateOf(t) == c && t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 &&
		dateOf(t.Add(-time.Second)) != c {
		return t // midnight exists, once
	}
	// Midnight is in a gap (or repeated): the first instant whose local date is not before c. Local dates only
	// move forward across the 26 hours on either side of a day's nominal midnight.
	lo, hi := t.Add(-26*time.Hour).Unix(), t.Add(26*time.Hour).Unix()
	for lo < hi {
		mid := lo + (hi-lo)/2
		if dateOf(time.Unix(mid, 0).In(loc)).before(c) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return time.Unix(lo, 0).In(loc)
}

// firstDay returns the first local date of the period of w that contains local date c.
func firstDay(w Window, c civil) civil {
	switch w {
	case Weekly:
		wd := (int(time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).Weekday()) + 6) % 7 // Monday = 0
		return civil{c.y, c.m, c.d - wd}.norm()
	case Monthly:
		return civil{c.y, c.m, 1}
	}
	return c
}

// periodStart returns the start of the period of w that contains t.
func periodStart(w Window, t time.Time, loc *time.Location) time.Time {
	if w == AllTime {
		return time.Time{}
	}
	return dayStart(firstDay(w, dateOf(t.In(loc))), loc)
}

// nextStart returns the start of the period n periods after the one that starts at start (a period start in
// its board's zone).
func nextStart(w Window, start time.Time, n int) time.Time {
	c := dateOf(start)
	switch w {
	case Daily:
		c.d += n
	case Weekly:
		c.d += 7 * n
	case Monthly:
		c.m += time.Month(n)
	default:
		return time.Time{}
	}
	return dayStart(c, start.Location())
}

// dateKey names the period of w whose first local date is c.
func dateKey(w Window, c civil) string {
	switch w {
	case Daily:
		return fmt.Sprintf("%04d-%02d-%02d", c.y, c.m, c.d)
	case Weekly:
		y, wk := time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, wk)
	case Monthly:
		return fmt.Sprintf("%04d-%02d", c.y, c.m)
	}
	return AllPeriod
}

// periodKey names the period of w that starts at start.
func periodKey(w Window, start time.Time) string {
	if w == AllTime {
		return AllPeriod
	}
	return dateKey(w, dateOf(start))
}

// Period returns the key of the period of window w that contains t, in the board's time zone: "all" for
// ALL_TIME, "2026-11-29" DAILY, "2026-W48" WEEKLY (ISO weeks, from Monday), "2026-11" MONTHLY; "" for SEASON,
// whose periods are in Redis (Store.CurrentPeriod).
func (b *Board) Period(w Window, t time.Time) string {
	if w == AllTime {
		return AllPeriod
	}
	if w == Season {
		return ""
	}
	return dateKey(w, firstDay(w, dateOf(t.In(b.Location()))))
}

// PeriodEnd returns when the period of w that contains t ends (the zero time for ALL_TIME and SEASON, see
// Store.NextReset).
func (b *Board) PeriodEnd(w Window, t time.Time) time.Time {
	if w == AllTime || w == Season {
		return time.Time{}
	}
	return nextStart(w, periodStart(w, t, b.Location()), 1)
}

// ParsePeriod checks that key names a period of window w and returns the period's start in loc.
func ParsePeriod(w Window, key string, loc *time.Location) (time.Time, error) {
	bad := errorf(Invalid, "period %q is not a %s period key", key, w)
	var c civil
	switch w {
	case AllTime:
		if key != AllPeriod {
			return time.Time{}, bad
		}
		return time.Time{}, nil
	case Daily, Monthly:
		layout := "2006-01-02"
		if w == Monthly {
			layout = "2006-01"
		}
		t, err := time.Parse(layout, key)
		if err != nil || t.Format(layout) != key || t.Year() < 1 {
			return time.Time{}, bad
		}
		c = dateOf(t)
	case Weekly:
		if len(key) != 8 || key[4:6] != "-W" {
			return time.Time{}, bad
		}
		y, err1 := strconv.Atoi(key[:4])
		wk, err2 := strconv.Atoi(key[6:])
		if err1 != nil || err2 != nil || y < 1 || wk < 1 || wk > 53 || key[:4] != fmt.Sprintf("%04d", y) ||
			key[6:] != fmt.Sprintf("%02d", wk) {
			return time.Time{}, bad
		}
		// ISO week 1 is the week with January 4th in it.
		c = firstDay(Weekly, civil{y, 1, 4})
		c = civil{c.y, c.m, c.d + 7*(wk-1)}.norm()
		if dateKey(Weekly, c) != key {
			return time.Time{}, bad // week 53 of a year that has 52
		}
	case Season:
		return time.Time{}, CheckSeasonID(key) // a season's start is in Redis (Store.Seasons), not in its key
	default:
		return time.Time{}, errorf(Invalid, "unknown window %q", string(w))
	}
	return dayStart(c, loc), nil
}

// expireAt returns when the keys of the period that starts at start may expire: after the period, the retained
// periods that follow it and the grace window. 0 for ALL_TIME (never).
func (b *Board) expireAt(w Window, start time.Time) int64 {
	if w == AllTime {
		return 0
	}
	return nextStart(w, start, 1+b.Retention).Add(b.Grace).Unix()
}

// dedupeTTL is how long an eventId is remembered: the longest period of the board plus its grace, and at least
// 24 hours.
func (b *Board) dedupeTTL() time.Duration {
	ttl := 24 * time.Hour
	for _, w := range b.Windows {
		var d time.Duration
		switch w {
		case Daily:
			d = 25 * time.Hour // a daylight-saving day
		case Weekly:
			d = 7*24*time.Hour + time.Hour
		case Monthly:
			d = 31*24*time.Hour + time.Hour
		}
		ttl = max(ttl, d+b.Grace)
	}
	return ttl
}

// windowPeriod is one period of one window.
type windowPeriod struct {
	Window Window
	Period string
}

// livePeriods returns every period of the board whose keys may still exist at now: for each window the current
// period and the earlier ones until their keys' expiry (retention and grace) lies in the past. A period the grace
// window still feeds is always among them, since its keys expire after its grace.
func (b *Board) livePeriods(now time.Time) []windowPeriod {
	var out []windowPeriod
	loc := b.Location()
	for _, w := range b.Windows {
		if w == AllTime {
			out = append(out, windowPeriod{w, AllPeriod})
			continue
		}
		if w == Season {
			continue // seasons are in Redis, not on the calendar: Store.liveSeasons
		}
		start := periodStart(w, now, loc)
		for i := 0; ; i++ {
			st := nextStart(w, start, -i)
			if i > 0 && b.expireAt(w, st) <= now.Unix() {
				break
			}
			out = append(out, windowPeriod{w, periodKey(w, st)})
		}
	}
	return out
}
