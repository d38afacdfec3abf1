package leaderboard

import (
	"strings"
	"testing"
	"time"
)

// FuzzSeasonID feeds arbitrary admin input to CheckSeasonID: it accepts exactly the ids of the documented rule
// (1 to 64 bytes of A-Z a-z 0-9 . _ -, a letter or digit first, not 'all' in any case, not shaped like a
// calendar period key), checked here byte by byte, and no accepted id parses as a period key of any window.
func FuzzSeasonID(f *testing.F) {
	for _, s := range []string{"spring", "s1", "2026-11-29", "2026-W48", "2026-w48", "2026-11", "2026-13", "ALL",
		"all", "-x", ".x", "_x", "a b", "é", "", strings.Repeat("a", 64), strings.Repeat("a", 65), "2026-11-29x",
		"season.2026_Q4-final"} {
		f.Add(s)
	}
	loc := time.UTC
	f.Fuzz(func(t *testing.T, id string) {
		want := seasonIDRule(id)
		err := CheckSeasonID(id)
		if (err == nil) != want {
			t.Fatalf("CheckSeasonID(%q) = %v, the rule says valid: %v", id, err, want)
		}
		if err != nil {
			if ErrorCode(err) != Invalid {
				t.Fatalf("CheckSeasonID(%q): %v is not BAD_USER_INPUT", id, err)
			}
			return
		}
		for _, w := range []Window{Daily, Weekly, Monthly} {
			if _, perr := ParsePeriod(w, id, loc); perr == nil {
				t.Fatalf("season id %q parses as a %s period", id, w)
			}
		}
	})
}

// seasonIDRule is the documented season id rule, written out without regular expressions.
func seasonIDRule(id string) bool {
	if len(id) < 1 || len(id) > MaxSeasonIDBytes || strings.EqualFold(id, "all") {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(id[0]) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	calendar := len(id) >= 7 && digits(id[:4]) && id[4] == '-' &&
		(len(id) == 7 && digits(id[5:]) || // 2026-11
			len(id) == 10 && digits(id[5:7]) && id[7] == '-' && digits(id[8:]) || // 2026-11-29
			len(id) == 8 && (id[5] == 'W' || id[5] == 'w') && digits(id[6:])) // 2026-W48
	return !calendar
}
