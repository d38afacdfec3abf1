package server

import (
	"testing"
	"time"
)

// A board deleted and created again with other windows through one server, read through it and through a second
// server that had its definition cached: a read of a window only the new board has answers on both. The deleting
// server's hub store (Hub.Top resolves through it) had the old definition cached while the hub did not watch the
// board, so no deletion notice made it forget, and that server answered 'board "rw" has no DAILY window' for good
// (every run under -race): Resolve refused in Go, where no script could find the definition stale.
func TestRecreatedWithOtherWindowsReadElsewhere(t *testing.T) {
	t.Parallel()
	for _, ledgered := range []bool{false, true} {
		cfg := testConfig(t)
		if ledgered {
			cfg = ledgerConfig(t, &closeClock{t: ledgerStart})
		}
		a, b := startServer(t, cfg), startServer(t, cfg)
		a.create(t, map[string]any{"id": "rw"})
		a.submit(t, map[string]any{"board": "rw", "playerId": "old", "score": 1})
		b.must(t, "", `{ top(board: "rw") { playerId } }`, nil, nil) // b caches the definition
		a.must(t, testAdminKey, deleteMutation, map[string]any{"id": "rw"}, nil)
		a.create(t, map[string]any{"id": "rw", "windows": []string{"ALL_TIME", "DAILY"}})
		a.submit(t, map[string]any{"board": "rw", "playerId": "new", "score": 2})
		const q = `{ top(board: "rw", window: DAILY) { playerId } }`
		want := a.do(t, "", q, nil)
		var got gqlResponse
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = b.do(t, "", q, nil); len(got.Errors) == 0 {
				break
			}
		}
		if len(want.Errors) > 0 || len(got.Errors) > 0 || string(got.Data) != string(want.Data) {
			t.Fatalf("ledger %v: through the other server %s %+v, through the first %s %+v", ledgered, got.Data,
				got.Errors, want.Data, want.Errors)
		}
	}
}
