package redistest

import "testing"

// WithoutRace skips t under the race detector: a test whose work is one goroutine's volume (many submissions and
// reads one after another, a board of a million players), where the detector has nothing to see and only makes the
// client several times slower. make test runs these tests without it after the race run (the Makefile's
// NORACE_TESTS, which must name each of them).
func WithoutRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("sequential volume: make test runs it without the race detector (NORACE_TESTS)")
	}
}
