package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// A sharded SUM board with ALL_TIME, DAILY and SEASON windows whose history holds a deletion of the id (another
// definition's board with other players), two seasons (the first ended by endSeason), ties, names and metadata,
// removePlayer before and after a day closed, served by two servers on one Redis and one database. Redis loses every key of
// the board (every shard) while writes go on: until it is restored, reads through either server answer
// UNAVAILABLE or exactly as a twin board fed the same writes that lost nothing, never NOT_FOUND, an empty or a
// partial list; the restore runs once between the two servers; afterwards every window and period answers as the
// twin (every field), the deleted board's players stay gone, a late score into the closed day stays refused, and a
// topUpdates subscriber's list equals a fresh top read.
func TestLedgerRestoreOfAShardedSeasonBoard(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = 100 * time.Millisecond
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	logs := []*syncBuffer{{}, {}}
	start := func(i int) *testServer {
		return startServerLog(t, cfg, slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
	a, b := start(0), start(1)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server a:\n%s\nserver b:\n%s", logs[0], logs[1])
		}
	})
	const id, twin = "rs", "rs-twin"
	boards := []string{id, twin}
	at := func(d time.Duration) { clock.Set(ledgerStart.Add(d)) }
	both := func(f func(board string)) {
		for _, bd := range boards {
			f(bd)
		}
	}
	both(func(bd string) {
		a.create(t, map[string]any{"id": bd, "shards": 2})
		for i := range 6 {
			a.submit(t, map[string]any{"board": bd, "playerId": fmt.Sprintf("gone%d", i), "score": float64(500 + i)})
		}
		// A ledger check may be catching the new board up (a write being applied): UNAVAILABLE, retried.
		a.doAvailableAs(t, testAdminKey, deleteMutation, map[string]any{"id": bd})
		a.create(t, map[string]any{"id": bd, "shards": 3, "mode": "SUM", "windows": []string{"ALL_TIME", "DAILY", "SEASON"},
			"graceSeconds": 60})
		a.must(t, testAdminKey, `mutation($b: ID!, $e: Time!) { startSeason(board: $b, id: "s1", endsAt: $e) { changed } }`,
			map[string]any{"b": bd, "e": ledgerStart.Add(72 * time.Hour)}, nil)
	})
	submit := func(i int, p string, v float64) {
		both(func(bd string) {
			in := map[string]any{"board": bd, "playerId": p, "score": v, "eventId": fmt.Sprintf("%s-%d", p, i)}
			if i%3 == 0 {
				in["displayName"] = fmt.Sprintf("Name %d", i)
			}
			if i%4 == 0 {
				in["metadata"] = map[string]any{"i": i, "s": "<&>"}
			}
			a.submit(t, in)
		})
	}
	for i := range 30 { // day 1: ties (equal totals reached at different moments), zero deltas
		at(time.Duration(i) * time.Minute)
		submit(i, fmt.Sprintf("p%d", i%9), float64(i%4))
	}
	both(func(bd string) {
		a.must(t, testAdminKey, `mutation($b: ID!) { removePlayer(board: $b, playerId: "p3") }`, map[string]any{"b": bd}, nil)
	})
	at(20 * time.Hour) // day 2: day 1 and its grace are over
	waitUntil(t, 10*time.Second, "the close of day 1 on both boards", func() bool {
		for _, bd := range boards {
			evs, err := a.Store.Closes(ctxT(t, 5*time.Second), bd, "0-0", 10)
			if err != nil || len(evs) == 0 {
				return false
			}
		}
		return true
	})
	both(func(bd string) {
		a.must(t, testAdminKey, `mutation($b: ID!) { endSeason(board: $b) { changed } }`, map[string]any{"b": bd}, nil)
		a.must(t, testAdminKey, `mutation($b: ID!, $e: Time!) { startSeason(board: $b, id: "s2", endsAt: $e) { changed } }`,
			map[string]any{"b": bd, "e": ledgerStart.Add(96 * time.Hour)}, nil)
		// Out of ALL_TIME; closed day 1 and ended season s1 keep p4 (closed is final).
		a.must(t, testAdminKey, `mutation($b: ID!) { removePlayer(board: $b, playerId: "p4") }`, map[string]any{"b": bd}, nil)
	})
	for i := 30; i < 45; i++ {
		at(20*time.Hour + time.Duration(i)*time.Minute)
		submit(i, fmt.Sprintf("p%d", i%11), float64(i%3))
	}

	const read = `query($b: ID!) {
		all: top(board: $b, first: 50) { playerId displayName rank tieRank score topPercent updatedAt metadata approximate }
		d1: top(board: $b, window: DAILY, period: "2031-03-14", first: 50) { playerId displayName rank tieRank score updatedAt metadata }
		d2: top(board: $b, window: DAILY, period: "2031-03-15", first: 50) { playerId displayName rank tieRank score updatedAt metadata }
		s1: top(board: $b, window: SEASON, period: "s1", first: 50) { playerId rank tieRank score updatedAt }
		s2: top(board: $b, window: SEASON, first: 50) { playerId rank tieRank score updatedAt }
		r: rank(board: $b, playerId: "p5") { rank tieRank score topPercent }
		ar: aroundMe(board: $b, playerId: "p7", radius: 2) { playerId rank }
		gone: rank(board: $b, playerId: "gone3") { rank }
		removed: rank(board: $b, window: DAILY, period: "2031-03-14", playerId: "p3") { rank }
		kept: rank(board: $b, window: DAILY, period: "2031-03-14", playerId: "p4") { rank score }
		leaderboard(id: $b) { mode shards size seasons { id startedAt endsAt running }
			dp: periods(window: DAILY) { period size endedAt } sp: periods(window: SEASON) { period size endedAt } } }`
	vars := func(bd string) map[string]any { return map[string]any{"b": bd} }
	want := func() string {
		r := a.do(t, "", read, vars(twin))
		if len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
		return string(r.Data)
	}
	if got, w := a.do(t, "", read, vars(id)), want(); string(got.Data) != w || strings.Contains(w, `"playerId":"gone`) {
		t.Fatalf("before the loss:\n%s %+v\nthe twin:\n%s", firstDiff(string(got.Data), w), got.Errors, firstDiff(w, string(got.Data)))
	}

	conn := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	live := &liveList{first: 10}
	pump(t, conn, map[string]*liveList{id: live})
	if err := conn.Subscribe(id, topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
		t.Fatal(err)
	}
	waitLive(t, b, live, id, 10*time.Second)

	// Redis loses the board, every shard, and writes go on (retried with their eventIds while they answer
	// UNAVAILABLE); meanwhile every read through either server is UNAVAILABLE or the twin's answer.
	if err := loseKeys(ctxT(t, 5*time.Second), redisClient(t, a), shardKeys(t, a, id, 3)); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	readerDone := make(chan string)
	go func() {
		bad := ""
		for ctx.Err() == nil {
			for _, s := range []*testServer{a, b} {
				r := s.do(t, "", read, vars(id))
				if len(r.Errors) > 0 {
					if cs := r.Codes(); len(cs) == 0 || cs[0] != "UNAVAILABLE" {
						bad = fmt.Sprintf("a read while restoring: %s %+v", r.Data, r.Errors)
					}
				}
			}
		}
		readerDone <- bad
	}()
	for i := 45; i < 55; i++ {
		at(20*time.Hour + time.Duration(i)*time.Minute)
		p := fmt.Sprintf("p%d", i%5)
		for _, bd := range boards {
			in := map[string]any{"board": bd, "playerId": p, "score": 2, "eventId": fmt.Sprintf("late-%d", i)}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				r := a.do(t, testSubmitKey, submitMutation, map[string]any{"in": in})
				if len(r.Errors) == 0 {
					break
				}
				if cs := r.Codes(); len(cs) != 1 || cs[0] != "UNAVAILABLE" || time.Now().After(deadline) {
					t.Fatalf("a write while %s is restored: %+v", bd, r.Errors)
				}
			}
		}
	}
	var got gqlResponse
	w := want()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = b.do(t, "", read, vars(id)); len(got.Errors) == 0 {
			break
		}
	}
	stop()
	if bad := <-readerDone; bad != "" {
		t.Fatal(bad)
	}
	if string(got.Data) != w {
		t.Fatalf("after the restore:\n%s %+v\nthe twin:\n%s", firstDiff(string(got.Data), w), got.Errors, firstDiff(w, string(got.Data)))
	}
	// Closed stays final: a late score into day 1 is refused on both.
	at(20*time.Hour + 56*time.Minute)
	for _, bd := range boards {
		a.wantCode(t, testSubmitKey, "PERIOD_CLOSED", submitMutation, map[string]any{"in": map[string]any{
			"board": bd, "playerId": "late", "score": 9, "achievedAt": ledgerStart.Add(time.Hour)}})
	}
	waitLive(t, b, live, id, 10*time.Second)
	// Once between the two servers (a restore the other found running is a refusal, not a second restore).
	time.Sleep(300 * time.Millisecond) // three more ledger checks
	n := 0
	for _, l := range logs {
		for _, line := range strings.Split(l.String(), "\n") {
			if strings.Contains(line, `msg="restored from the ledger"`) && strings.Contains(line, "board="+id+" ") &&
				strings.Contains(line, "catch_up=false") {
				n++
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d restores of %s, want 1", n, id)
	}
}

// firstDiff is a from where it first differs from b, with some context before.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return "…" + a[max(0, i-300):min(len(a), i+300)]
}
