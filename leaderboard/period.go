package leaderboard

import (
	"fmt"
	"strconv"
	"time"
)

// AllPeriod is the period key of the ALL_TIME window.
const AllPeriod = "all"

// windowCodes are the one-letter names of windows inside Redis keys.
var windowCodes = map[Window]string{AllTime: "a", Daily: "d", Weekly: "w", Monthly: "m"}

// periodStart returns the local start of the period of w that contains t.
func periodStart(w Window, t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	switch w {
	case Daily:
		return time.Date(y, m, d, 0, 0, 0, 0, loc)
	case Weekly:
		wd := (int(t.Weekday()) + 6) % 7 // Monday = 0
		return time.Date(y, m, d-wd, 0, 0, 0, 0, loc)
	case Monthly:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc)
	}
	return time.Time{}
}

// nextStart returns the start of the period n periods after the one that starts at start.
func nextStart(w Window, start time.Time, n int) time.Time {
	y, m, d := start.Date()
	loc := start.Location()
	switch w {
	case Daily:
		return time.Date(y, m, d+n, 0, 0, 0, 0, loc)
	case Weekly:
		return time.Date(y, m, d+7*n, 0, 0, 0, 0, loc)
	case Monthly:
		return time.Date(y, m+time.Month(n), 1, 0, 0, 0, 0, loc)
	}
	return time.Time{}
}

// periodKey names the period of w that starts at start.
func periodKey(w Window, start time.Time) string {
	switch w {
	case Daily:
		return start.Format("2006-01-02")
	case Weekly:
		y, wk := start.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, wk)
	case Monthly:
		return start.Format("2006-01")
	}
	return AllPeriod
}

// Period returns the key of the period of window w that contains t, in the board's time zone: "all" for
// ALL_TIME, "2026-11-29" DAILY, "2026-W48" WEEKLY (ISO weeks, from Monday), "2026-11" MONTHLY.
func (b *Board) Period(w Window, t time.Time) string {
	if w == AllTime {
		return AllPeriod
	}
	return periodKey(w, periodStart(w, t, b.Location()))
}

// PeriodEnd returns when the period of w that contains t ends (the zero time for ALL_TIME).
func (b *Board) PeriodEnd(w Window, t time.Time) time.Time {
	if w == AllTime {
		return time.Time{}
	}
	return nextStart(w, periodStart(w, t, b.Location()), 1)
}

// ParsePeriod checks that key names a period of window w and returns the period's start in loc.
func ParsePeriod(w Window, key string, loc *time.Location) (time.Time, error) {
	bad := errorf(Invalid, "period %q is not a %s period key", key, w)
	switch w {
	case AllTime:
		if key != AllPeriod {
			return time.Time{}, bad
		}
		return time.Time{}, nil
	case Daily:
		t, err := time.ParseInLocation("2006-01-02", key, loc)
		if err != nil || t.Format("2006-01-02") != key {
			return time.Time{}, bad
		}
		return t, nil
	case Monthly:
		t, err := time.ParseInLocation("2006-01", key, loc)
		if err != nil || t.Format("2006-01") != key {
			return time.Time{}, bad
		}
		return t, nil
	case Weekly:
		if len(key) != 8 || key[4:6] != "-W" {
			return time.Time{}, bad
		}
		y, err1 := strconv.Atoi(key[:4])
		wk, err2 := strconv.Atoi(key[6:])
		if err1 != nil || err2 != nil || y < 1 || wk < 1 || wk > 53 {
			return time.Time{}, bad
		}
		// ISO week 1 is the week with January 4th in it.
		jan4 := time.Date(y, 1, 4, 0, 0, 0, 0, loc)
		start := periodStart(Weekly, jan4, loc)
		start = nextStart(Weekly, start, wk-1)
		if periodKey(Weekly, start) != key {
			return time.Time{}, bad
		}
		return start, nil
	}
	return time.Time{}, errorf(Invalid, "unknown window %q", string(w))
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
