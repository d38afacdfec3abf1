package leaderboard_test

import (
	"math/big"
	"strconv"
	"strings"
	"testing"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

func TestCheckScoreText(t *testing.T) {
	for s, ok := range map[string]bool{"0": true, "-0": true, "9007199254740992": true, "-9007199254740992": true,
		"9007199254740993": false, "9007199254740992.0000000000000001": false, "9007199254740991.9999999": true,
		"9.007199254740992e15": true, "9.0071992547409921e15": false, "1e400": false, "1e-400": true, "12abc": false,
		"": false, "NaN": false, "Inf": false, "0x10": false, strings.Repeat("1", 600): false} {
		if err := lb.CheckScoreText(s); (err == nil) != ok || (err != nil && lb.ErrorCode(err) != lb.Invalid) {
			t.Errorf("CheckScoreText(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

// FuzzCheckScoreText compares the score rule with exact rational arithmetic: a decimal is accepted exactly when
// its value has magnitude at most 2^53.
func FuzzCheckScoreText(f *testing.F) {
	for _, s := range []string{"9007199254740993", "9007199254740992.5", "-9007199254740992", "1e16", "0.5", "1e-9"} {
		f.Add(s)
	}
	limit := new(big.Rat).SetInt64(1 << 53)
	f.Fuzz(func(t *testing.T, s string) {
		err := lb.CheckScoreText(s)
		if err != nil && lb.ErrorCode(err) != lb.Invalid {
			t.Fatalf("CheckScoreText(%q): error without a client code: %v", s, err)
		}
		// The oracle only judges plain decimals: digits, a point, an exponent of at most three digits (big.Rat also
		// reads fractions such as "00/1", which are no score).
		if strings.ContainsAny(s, "xXpP_iInN/") || len(s) > 400 {
			return
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err != nil || e > 999 || e < -999 {
				return
			}
		}
		x, ok := new(big.Rat).SetString(s)
		if !ok {
			if err == nil {
				if _, perr := strconv.ParseFloat(s, 64); perr != nil {
					t.Fatalf("CheckScoreText(%q) accepted what is not a number", s)
				}
			}
			return
		}
		if want := x.Abs(x).Cmp(limit) <= 0; (err == nil) != want {
			t.Fatalf("CheckScoreText(%q) = %v, exact magnitude within 2^53: %v", s, err, want)
		}
	})
}
