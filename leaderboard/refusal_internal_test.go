package leaderboard

import "testing"

// refusalOf reads back what refusalReason wrote, with its code; a void's reason is no refusal, also one an admin
// wrote in that form with a code that is not a refusal's.
func TestRefusalOf(t *testing.T) {
	for _, code := range []Code{RateLimited, PeriodClosed, Invalid, Conflict} {
		e := refusalOf(refusalReason(errorf(code, "limit (of 3): reached")))
		if e == nil || e.Code != code || e.Message != "limit (of 3): reached" {
			t.Errorf("%s: %+v", code, e)
		}
	}
	for _, reason := range []string{"", "speed hack", "refused (FOO): bar", "refused (RATE_LIMITED)", "refused (INTERNAL): x",
		"Refused (RATE_LIMITED): x"} {
		if e := refusalOf(reason); e != nil {
			t.Errorf("%q: %+v", reason, e)
		}
	}
}
