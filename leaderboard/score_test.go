package leaderboard_test

import (
	"math/big"
	"regexp"
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
		if err == nil {
			if _, perr := strconv.ParseFloat(s, 64); perr != nil {
				t.Fatalf("CheckScoreText(%q) accepted what is not a number", s)
			}
		}
		// The oracle judges plain decimals only: big.Rat also reads fractions ("00/1") and base prefixes
		// ("0B0000000"), which are no score.
		if len(s) > 400 || !plainDecimal.MatchString(s) {
			return
		}
		x, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat does not read the decimal %q", s)
		}
		if want := x.Abs(x).Cmp(limit) <= 0; (err == nil) != want {
			t.Fatalf("CheckScoreText(%q) = %v, exact magnitude within 2^53: %v", s, err, want)
		}
	})
}

// plainDecimal: an optional sign, digits with an optional point, an exponent of at most three digits.
var plainDecimal = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$`)
