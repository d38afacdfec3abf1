package server

import (
	"fmt"
	"testing"
	"time"
)

// A board deleted and created again with other windows through one server, read through it and through a second
// server that had its definition cached: a read of a window only the new board has answers on both; so do its
// closed periods and a season's start on a third server whose hub never watched the board (Store.windowBoard). The deleting
// server's hub store (Hub.Top resolves through it) had the old definition cached while the hub did not watch the
// board, so no deletion notice made it forget, and that server answered 'board "rw" has no DAILY window' for good
// (every run under -race): Resolve refused in Go, where no script could find the definition stale.
func TestRecreatedWithOtherWindowsReadElsewhere(t *testing.T) {
	t.Parallel()
	for _, ledgered := range []bool{false, true} {
		clock := &closeClock{t: ledgerStart}
		cfg := testConfig(t)
		cfg.Clock = clock.Now
		if ledgered {
			cfg = ledgerConfig(t, clock)
		}
		a, b, c := startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)
		a.create(t, map[string]any{"id": "rw"})
		a.submit(t, map[string]any{"board": "rw", "playerId": "old", "score": 1})
		b.must(t, "", `{ top(board: "rw") { playerId } }`, nil, nil) // b caches the definition
		// c caches it too, without a top list its hub would watch (whose deletion notice makes the stores forget).
		c.must(t, "", `{ leaderboard(id: "rw") { size } }`, nil, nil)
		a.must(t, testAdminKey, deleteMutation, map[string]any{"id": "rw"}, nil)
		a.create(t, map[string]any{"id": "rw", "windows": []string{"ALL_TIME", "DAILY", "SEASON"}})
		a.submit(t, map[string]any{"board": "rw", "playerId": "new", "score": 2})
		// The calls that name a window the old board lacked: its closed periods, a season's start, a read.
		var periods struct {
			Leaderboard struct {
				Windows []string
				Periods []struct{ Period string }
			}
		}
		c.must(t, "", `{ leaderboard(id: "rw") { windows periods(window: SEASON) { period } } }`, nil, &periods)
		if fmt.Sprint(periods.Leaderboard.Windows) != "[ALL_TIME DAILY SEASON]" || len(periods.Leaderboard.Periods) != 0 {
			t.Fatalf("ledger %v: the new board's windows and closed seasons: %+v", ledgered, periods)
		}
		var started struct{ StartSeason struct{ Changed bool } }
		c.must(t, testAdminKey, `mutation($e: Time!) { startSeason(board: "rw", id: "s1", endsAt: $e) { changed } }`,
			map[string]any{"e": ledgerStart.Add(time.Hour).Format(time.RFC3339)}, &started)
		if !started.StartSeason.Changed {
			t.Fatalf("ledger %v: startSeason through the other server changed nothing", ledgered)
		}
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
