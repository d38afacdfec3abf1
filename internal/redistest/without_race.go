package redistest

import (
	"strings"
	"sync"
	"testing"
)

// WithoutRace skips t under the race detector: a test whose work is one goroutine's volume (many submissions and
// reads one after another, a board of a million players), where the detector has nothing to see and only makes the
// client several times slower. make test runs these tests without it after the race run (the Makefile's
// NORACE_TESTS, which must name each of them). Without the detector such a test is bound by Redis, not by its
// client, so Targets gives it (and its subtests) a standalone redis-server of its own: on the one shared server
// they queued behind each other on one Redis thread while the other core idled.
func WithoutRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("sequential volume: make test runs it without the race detector (NORACE_TESTS)")
	}
	volume.Store(t.Name(), true)
}

// volume holds the names of the tests that called WithoutRace.
var volume sync.Map

// isVolume reports whether tb is a test that called WithoutRace, or a subtest of one.
func isVolume(tb testing.TB) bool {
	name := tb.Name()
	for {
		if _, ok := volume.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}
