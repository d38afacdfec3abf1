package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// boardSnapshot is what a replica held of a board at one moment: every key of the board with its value (DUMP)
// and its time to live.
type boardSnapshot map[string]struct {
	dump string
	ttl  time.Duration
}

// shardKeys lists every key of a board of shards shards (1: unsharded) in the server's (standalone) Redis.
func shardKeys(t *testing.T, s *testServer, board string, shards int) []string {
	t.Helper()
	c, ctx := redisClient(t, s), ctxT(t, 10*time.Second)
	var out []string
	for _, base := range s.Store.ShardKeyBases(&leaderboard.Board{ID: board, Shards: shards}) {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, "*", 1000).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if strings.HasPrefix(k, base) {
					out = append(out, k)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return out
}

// snapshotBoard copies every key of a board of shards shards from the server's (standalone) Redis.
func snapshotBoard(t *testing.T, s *testServer, board string, shards int) boardSnapshot {
	t.Helper()
	c, ctx := redisClient(t, s), ctxT(t, 10*time.Second)
	keys := shardKeys(t, s, board, shards)
	for _, base := range s.Store.ShardKeyBases(&leaderboard.Board{ID: board, Shards: shards}) {
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, base) }) {
			t.Fatalf("no keys of %s under %s", board, base)
		}
	}
	snap := boardSnapshot{}
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 0 {
			ttl = 0
		}
		snap[k] = struct {
			dump string
			ttl  time.Duration
		}{d, ttl}
	}
	return snap
}

// failOver makes the server's Redis hold the board as the snapshot does, as a failover to a replica that had
// copied nothing of the board since would: every key of the board now goes, the snapshot's come back.
func failOver(t *testing.T, s *testServer, board string, shards int, snap boardSnapshot) {
	t.Helper()
	c, ctx := redisClient(t, s), ctxT(t, 10*time.Second)
	keys := shardKeys(t, s, board, shards)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		for k, v := range snap {
			p.RestoreReplace(ctx, k, v.ttl, v.dump)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A failover to a replica that lagged behind a deleteLeaderboard and createLeaderboard of the same id: Redis
// holds the deleted board, whose high-water mark says nothing of the new board (its events are numbered from 1
// again). The board must end as the ledger says, as a twin fed the same submissions that lost nothing: the new
// board's players only, also a write sent right after the failover, unsharded and sharded either way, whether the
// write finds the deleted board or a ledger check does first. Before the ledger's key of the board was kept in
// Redis, the deleted board stayed for good (its mark was past the new board's head) and the write after the
// failover was taken as seen and never applied; before the write's gate compared the key, that write answered
// duplicate with rank 0.
func TestLedgerFailoverToReplicaOfTheDeletedBoard(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	// No ledger check comes by itself (its interval is an hour): the write after the failover must find the
	// deleted board, or the check the test calls.
	cfg.LedgerCheckInterval = time.Hour
	s := startServer(t, cfg)
	const read = `query($b: ID!) { top(board: $b, first: 50) { playerId rank tieRank score displayName metadata updatedAt }
		d: top(board: $b, window: DAILY, first: 50) { playerId rank tieRank score displayName updatedAt }
		rank(board: $b, playerId: "new2") { rank tieRank score }
		leaderboard(id: $b) { size shards } }`
	for _, c := range []struct {
		from, to int
		check    bool // a ledger check finds the deleted board before the write
	}{{1, 1, false}, {3, 3, false}, {3, 1, false}, {1, 3, false}, {1, 1, true}, {3, 1, true}} {
		id, twin := fmt.Sprintf("fo%d-%d-%v", c.from, c.to, c.check), fmt.Sprintf("tw%d-%d-%v", c.from, c.to, c.check)
		def := func(id string, shards int) map[string]any {
			return map[string]any{"id": id, "windows": []string{"ALL_TIME", "DAILY"}, "shards": shards}
		}
		s.create(t, def(id, c.from))
		for i := range 12 {
			clock.Set(ledgerStart.Add(time.Duration(i) * time.Second))
			s.submit(t, map[string]any{"board": id, "playerId": fmt.Sprintf("old%d", i), "score": float64(100 + i)})
		}
		snap := snapshotBoard(t, s, id, c.from)
		s.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
		s.create(t, def(id, c.to))
		s.create(t, def(twin, c.to))
		submit := func(i int, p string, v float64) {
			for _, b := range []string{id, twin} {
				s.submit(t, map[string]any{"board": b, "playerId": p, "score": v, "displayName": "N " + p,
					"metadata": map[string]any{"i": i}, "eventId": p})
			}
		}
		for i := range 3 {
			clock.Set(ledgerStart.Add(time.Duration(20+i) * time.Second))
			submit(i, fmt.Sprintf("new%d", i), float64(i%2))
		}
		failOver(t, s, id, max(c.from, c.to), snap)
		clock.Set(ledgerStart.Add(30 * time.Second))
		if c.check {
			if n, err := s.App.Store.CheckLedger(ctxT(t, 10*time.Second)); err != nil || n < 1 {
				t.Fatalf("%s: the ledger check after the failover found %d boards to restore, %v", id, n, err)
			}
		}
		// Without the check, the write right after the failover finds the deleted board's keys: UNAVAILABLE with
		// outcome UNKNOWN (the ledger recorded it, the restore applies it), retried with its eventId as the README
		// says (a retry that finds the restore running answers UNAVAILABLE: it applied nothing). Its answer is the
		// twin's, but for what a retry says.
		in := map[string]any{"board": id, "playerId": "new9", "score": 0.5, "displayName": "N new9",
			"metadata": map[string]any{"i": 9}, "eventId": "new9"}
		var answer struct{ SubmitScore scoreResult }
		retried, recorded := false, false
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": in})
			if len(r.Errors) == 0 {
				if err := json.Unmarshal(r.Data, &answer); err != nil {
					t.Fatal(err)
				}
				break
			}
			if codes := r.Codes(); len(codes) != 1 || codes[0] != "UNAVAILABLE" || time.Now().After(deadline) ||
				(!c.check && !retried && r.Errors[0].Extensions["outcome"] != "UNKNOWN") {
				t.Fatalf("%s: the write after the failover (retried: %v): %+v", id, retried, r.Errors)
			}
			retried = true
			recorded = recorded || r.Errors[0].Extensions["outcome"] == "UNKNOWN"
		}
		if !retried && !c.check {
			t.Fatalf("%s: the write after the failover was taken by the deleted board's keys: %+v", id, answer.SubmitScore)
		}
		in["board"] = twin
		twinAnswer := s.submit(t, in)
		if recorded {
			// The restore applied an attempt the ledger recorded and kept no answer for it: the retry answers the
			// entry now, which cannot say what the first call did (the README's "Durability").
			twinAnswer.Duplicate, twinAnswer.Updated = true, false
		}
		if !reflect.DeepEqual(answer.SubmitScore, twinAnswer) {
			a, _ := json.Marshal(answer.SubmitScore)
			b, _ := json.Marshal(twinAnswer)
			t.Fatalf("%s: the write after the failover answered %s, the twin's %s (retried: %v)", id, a, b, retried)
		}
		want := s.do(t, "", read, map[string]any{"b": twin})
		if len(want.Errors) > 0 {
			t.Fatal(want.Errors)
		}
		var got gqlResponse
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = s.do(t, "", read, map[string]any{"b": id}); len(got.Errors) == 0 && string(got.Data) == string(want.Data) {
				break
			}
		}
		if string(got.Data) != string(want.Data) {
			t.Fatalf("%s after the failover:\n%s %+v\nthe twin:\n%s", id, got.Data, got.Errors, want.Data)
		}
	}
}

// A failover to a replica that lagged behind a deleteLeaderboard, then createLeaderboard of the same id: the
// creation finds the deleted board's keys. It must not take them for its own board (the same definition: the
// deleted board's players listed under the new one) nor for a conflict (another definition: CONFLICT, though the
// ledger recorded the creation). It answers UNAVAILABLE with its outcome open, a retry the board, and the board
// then reads empty, unsharded and sharded. The ledger check is left to its default interval's far side (1 h), so
// only the creation can find the stale keys.
func TestLedgerCreateOverTheDeletedBoardsKeys(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerCheckInterval = time.Hour
	s := startServer(t, cfg)
	const read = `query($b: ID!) { top(board: $b, first: 50) { playerId } leaderboard(id: $b) { size windows shards } }`
	for _, shards := range []int{1, 3} {
		for _, windows := range [][]string{{"ALL_TIME"}, {"ALL_TIME", "DAILY"}} {
			id := fmt.Sprintf("cd%d-%d", shards, len(windows))
			s.create(t, map[string]any{"id": id, "windows": []string{"ALL_TIME"}, "shards": shards})
			for i := range 4 {
				s.submit(t, map[string]any{"board": id, "playerId": fmt.Sprintf("old%d", i), "score": float64(i)})
			}
			snap := snapshotBoard(t, s, id, shards)
			s.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
			failOver(t, s, id, shards, snap)
			in := map[string]any{"id": id, "windows": windows, "shards": shards}
			// The first attempt finds the deleted board's keys: UNAVAILABLE, its outcome open (the ledger recorded
			// the creation, the restore applies it).
			for first, deadline := true, time.Now().Add(10*time.Second); ; first = false {
				r := s.do(t, testAdminKey, createMutation, map[string]any{"in": in})
				if len(r.Errors) == 0 && !first {
					break
				}
				if c := r.Codes(); len(c) != 1 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) ||
					(first && r.Errors[0].Extensions["outcome"] != "UNKNOWN") {
					t.Fatalf("%s: the creation over the deleted board's keys (first attempt: %v): %s %+v", id, first,
						r.Data, r.Errors)
				}
				time.Sleep(20 * time.Millisecond)
			}
			wantWindows, _ := json.Marshal(windows)
			want := fmt.Sprintf(`{"top":[],"leaderboard":{"size":0,"windows":%s,"shards":%d}}`, wantWindows, shards)
			var got gqlResponse
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if got = s.do(t, "", read, map[string]any{"b": id}); len(got.Errors) == 0 && string(got.Data) == want {
					break
				}
			}
			if len(got.Errors) > 0 || string(got.Data) != want {
				t.Fatalf("%s after its creation over the deleted board's keys: %s %+v, want %s", id, got.Data,
					got.Errors, want)
			}
		}
	}
}

// A failover to a replica that lagged: Redis holds a sharded board as it was some writes ago (SUM, DAILY, names,
// metadata, a removal and a day closed since the snapshot). The ledger check applies the missing events where the
// board stands: every field of every window and period ends as before the failover, and the day's close is not
// announced a second time.
func TestLedgerFailoverToALaggingReplica(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	// Two checks (a board found without its definition twice in a row is restored) outlast the creation of a
	// sharded board under -race on a busy machine: at 50 ms one restored the board its creator was reading.
	cfg.LedgerCheckInterval = 500 * time.Millisecond
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "lag", "mode": "SUM", "windows": []string{"ALL_TIME", "DAILY"}, "shards": 3,
		"closeEventTop": 10})
	submit := func(i int) {
		in := map[string]any{"board": "lag", "playerId": fmt.Sprintf("p%d", i%7), "score": float64(i%3) + 1,
			"eventId": fmt.Sprintf("e%d", i)}
		if i%2 == 0 {
			in["displayName"] = fmt.Sprintf("Name %d", i)
			in["metadata"] = map[string]any{"i": i}
		}
		s.submit(t, in)
	}
	for i := range 20 {
		clock.Set(ledgerStart.Add(time.Duration(i) * time.Minute))
		submit(i)
	}
	snap := snapshotBoard(t, s, "lag", 3)
	for i := 20; i < 40; i++ {
		clock.Set(ledgerStart.Add(time.Duration(i)*time.Minute + 15*time.Hour)) // the next day: the first closes
		submit(i)
		if i == 30 {
			s.must(t, testAdminKey, `mutation { removePlayer(board: "lag", playerId: "p3") }`, nil, nil)
		}
	}
	const read = `query($p: String) {
		a: top(board: "lag", first: 50) { playerId rank tieRank score displayName metadata updatedAt topPercent }
		d: top(board: "lag", window: DAILY, period: $p, first: 50) { playerId rank tieRank score displayName metadata updatedAt }
		leaderboard(id: "lag") { size periods(window: DAILY) { period size endedAt } } }`
	want := map[string]string{}
	for _, p := range []string{"2031-03-14", "2031-03-15"} {
		r := s.do(t, "", read, map[string]any{"p": p})
		if len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
		want[p] = string(r.Data)
	}
	var closesBefore []leaderboard.CloseEvent
	waitUntil(t, 10*time.Second, "the close of the first day", func() bool {
		var err error
		closesBefore, err = s.Store.Closes(ctxT(t, 5*time.Second), "lag", "0-0", 10)
		return err == nil && len(closesBefore) == 1
	})
	failOver(t, s, "lag", 3, snap)
	for _, p := range []string{"2031-03-14", "2031-03-15"} {
		// The closed day may be answered from its frozen standings for a while after the failover (names and
		// metadata as frozen at its close, where Redis shows each player's latest: the README's "History outlives
		// Redis"; seen once in make test): its ranking is compared, the open day's every field.
		same := func(got string) bool { return got == want[p] }
		if p == "2031-03-14" {
			same = func(got string) bool { return unnamed(t, got) == unnamed(t, want[p]) }
		}
		var got gqlResponse
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = s.do(t, "", read, map[string]any{"p": p}); len(got.Errors) == 0 && same(string(got.Data)) {
				break
			}
		}
		if len(got.Errors) > 0 || !same(string(got.Data)) {
			t.Fatalf("%s after the failover:\n%s %+v\nbefore it:\n%s", p, got.Data, got.Errors, want[p])
		}
	}
	// The catch-up applies the day's close again (its fence) without announcing it again: no second close event
	// (without WEBHOOK_URLS no delivery is open, so the one the replica lacked is not sent again either).
	time.Sleep(300 * time.Millisecond)
	closesAfter, err := s.Store.Closes(ctxT(t, 5*time.Second), "lag", "0-0", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range closesAfter {
		if c.ID() != closesBefore[0].ID() {
			t.Fatalf("a close event after the failover: %+v (the close: %+v)", c, closesBefore[0])
		}
	}
}

// A failover to a replica that lagged: Redis's counter of the board's change events goes back within the same
// epoch. A server whose hub took the versions before the failover must take the writes after it as new (they come
// from another process here, so that only the events tell it): its cached lists and its live screens (topUpdates)
// follow them, every field, unsharded and sharded:
//   - without the ledger, the writes after the failover reuse the lost versions;
//   - with the ledger, the other process's ledger check first applies the missing events, in shared calls: fewer
//     versions than the writes it replays, which the writes after it follow.
//
// The README ("Durability") promises it. Before, the hub took those events for ones its lists held until a
// version past the failover's came (in make test, the open day of TestLedgerFailoverToALaggingReplica stayed
// empty: a list read while Redis lagged was kept).
func TestFailoverWritesAfterIt(t *testing.T) {
	t.Parallel()
	for _, ledger := range []bool{false, true} {
		for _, shards := range []int{1, 3} {
			t.Run(fmt.Sprintf("ledger=%v/shards=%d", ledger, shards), func(t *testing.T) {
				t.Parallel()
				clock := &closeClock{t: ledgerStart}
				cfg := testConfig(t)
				cfg.Clock = clock.Now
				if ledger {
					cfg = ledgerConfig(t, clock)
					cfg.LedgerCheckInterval = time.Hour // this server never catches up by itself
				}
				a := startServer(t, cfg)
				a.create(t, map[string]any{"id": "lagged", "mode": "SUM", "shards": shards})
				// Another process, whose ledger check applies what Redis lacks (started after the creation: a check
				// every 50 ms may take a board being created under -race for one lost).
				b := startServer(t, func() Config { c := cfg; c.LedgerCheckInterval = 50 * time.Millisecond; return c }())
				const read = `{ top(board: "lagged", first: 50) { playerId rank tieRank score displayName metadata updatedAt topPercent } }`
				top := func(s *testServer) string {
					r := s.do(t, "", read, nil)
					if len(r.Errors) > 0 {
						t.Fatal(r.Errors)
					}
					return string(r.Data)
				}
				submit := func(s *testServer, i int) {
					clock.Set(ledgerStart.Add(time.Duration(i) * time.Second))
					s.submit(t, map[string]any{"board": "lagged", "playerId": fmt.Sprintf("p%d", i%9),
						"score": float64(i%4 + 1), "displayName": fmt.Sprintf("Name %d", i), "metadata": map[string]any{"i": i},
						"eventId": fmt.Sprintf("e%d", i)})
				}
				var snap boardSnapshot
				for i := range 24 {
					submit(a, i)
					if i == 11 {
						top(a) // the hub keeps the list from now on
						snap = snapshotBoard(t, a, "lagged", shards)
					}
				}
				// A live screen of the first server, rebuilt from its topUpdates.
				live := subscribeLive(t, a, "lagged", 50)
				waitLive(t, a, live, "lagged", 10*time.Second)
				// The hub took every version before the failover: it serves the list from memory.
				waitUntil(t, 10*time.Second, "the hub's list", func() bool {
					_, cached := a.App.Hub.TopToken(ctxT(t, time.Second), leaderboard.View{Board: "lagged"}, 0, 50)
					return cached
				})
				before := top(a)
				failOver(t, a, "lagged", shards, snap)
				if ledger {
					waitUntil(t, 10*time.Second, "the catch-up", func() bool { return top(b) == before })
				}
				// Writes through the other process: versions the failover lost are used again.
				for i := 24; i < 28; i++ {
					submit(b, i)
				}
				want := top(b)
				if want == before {
					t.Fatal("the writes after the failover changed nothing")
				}
				var got string
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if got = top(a); got == want {
						break
					}
				}
				if got != want {
					t.Fatalf("the first server after the writes:\n%s\nthe other's:\n%s", got, want)
				}
				waitLive(t, a, live, "lagged", 10*time.Second)
				// While a change is pending the hub reads Redis: the answers stay right over many of its refreshes
				// (MaxUpdateRate), not only until it takes the events.
				for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					if got = top(a); got != want {
						t.Fatalf("the first server after the writes, later:\n%s\nthe other's:\n%s", got, want)
					}
				}
			})
		}
	}
}
