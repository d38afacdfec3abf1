package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The ledger through the server (DATABASE_URL): scoreEvents, voidScoreEvents and rebuildLeaderboard over HTTP,
// and the write mutations with the ledger on, against a database of the shared PostgreSQL server.

// ledgerStart is the moment the ledger tests' clocks start at (no test depends on today's date).
var ledgerStart = time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)

// ledgerConfig is testConfig with a ledger in a fresh database and the clock's time.
func ledgerConfig(t *testing.T, clock *closeClock) Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.DatabaseURL = pgtest.Shared(t).Database(t)
	cfg.Clock = clock.Now
	return cfg
}

// ledgerTargets runs f in parallel subtests on the shared standalone Redis and on the shared 3-primary cluster
// (not with REDISTEST_NO_CLUSTER set); f's config is ledgerConfig's on that Redis.
func ledgerTargets(t *testing.T, f func(t *testing.T, clock *closeClock, cfg Config)) {
	for _, cluster := range []bool{false, true} {
		name := "standalone"
		if cluster {
			name = "cluster"
		}
		t.Run(name, func(t *testing.T) {
			if v, _ := strconv.ParseBool(os.Getenv(redistest.NoClusterEnv)); cluster && v {
				t.Skipf("%s is set", redistest.NoClusterEnv)
			}
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			cfg := ledgerConfig(t, clock)
			if cluster {
				cfg.RedisURL = ""
				cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
			}
			f(t, clock, cfg)
		})
	}
}

// ledgerPool is a connection pool of the test's own to the ledger's database.
func ledgerPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctxT(t, 10*time.Second), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ledgerKinds returns the kinds of a board's events in the ledger, in order (the live board of that id).
func ledgerKinds(t *testing.T, pool *pgxpool.Pool, board string) []leaderboard.EventKind {
	t.Helper()
	rows, err := pool.Query(ctxT(t, 10*time.Second), `SELECT e.kind FROM events e JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL ORDER BY e.seq`, []byte(board))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []leaderboard.EventKind
	for rows.Next() {
		var k int16
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, leaderboard.EventKind(k))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	scoreEventsQuery = `query($b: ID!, $p: ID!, $n: Int, $after: String) {
		scoreEvents(board: $b, playerId: $p, first: $n, after: $after) {
			events { eventId playerId score achievedAt recordedAt voided voidReason } next } }`
	voidMutation    = `mutation($b: ID!, $ids: [ID!]!, $r: String!) { voidScoreEvents(board: $b, eventIds: $ids, reason: $r) }`
	rebuildMutation = `mutation($id: ID!) { rebuildLeaderboard(id: $id) }`
	submitsMutation = `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { entry { playerId score } duplicate } }`
)

type scoreEventJSON struct {
	EventID    string    `json:"eventId"`
	PlayerID   string    `json:"playerId"`
	Score      float64   `json:"score"`
	AchievedAt time.Time `json:"achievedAt"`
	RecordedAt time.Time `json:"recordedAt"`
	Voided     bool      `json:"voided"`
	VoidReason *string   `json:"voidReason"`
}

func (e scoreEventJSON) String() string {
	reason := "<null>"
	if e.VoidReason != nil {
		reason = strconv.Quote(*e.VoidReason)
	}
	return fmt.Sprintf("%s %s %v achieved=%s recorded=%s voided=%v reason=%s", e.EventID, e.PlayerID, e.Score,
		e.AchievedAt.UTC().Format(time.RFC3339Nano), e.RecordedAt.UTC().Format(time.RFC3339Nano), e.Voided, reason)
}

type scoreEventPageJSON struct {
	Events []scoreEventJSON `json:"events"`
	Next   *string          `json:"next"`
}

func (s *testServer) scoreEvents(t *testing.T, board, player string, first int, after *string) scoreEventPageJSON {
	t.Helper()
	vars := map[string]any{"b": board, "p": player, "n": first}
	if after != nil {
		vars["after"] = *after
	}
	var out struct{ ScoreEvents scoreEventPageJSON }
	s.must(t, testAdminKey, scoreEventsQuery, vars, &out)
	return out.ScoreEvents
}

// allScoreEvents reads a player's events page by page (first a page) and checks the cursors: every page but the
// last is full and has a next, the last has none.
func (s *testServer) allScoreEvents(t *testing.T, board, player string, first int) []scoreEventJSON {
	t.Helper()
	var out []scoreEventJSON
	var after *string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("scoreEvents: more than 100 pages")
		}
		p := s.scoreEvents(t, board, player, first, after)
		out = append(out, p.Events...)
		if p.Next == nil {
			if len(p.Events) == 0 && pages > 0 {
				t.Errorf("scoreEvents(first %d): an empty last page after a next", first)
			}
			return out
		}
		if len(p.Events) != first {
			t.Errorf("scoreEvents(first %d): a page of %d with a next", first, len(p.Events))
		}
		after = p.Next
	}
}

func renderEvents(es []scoreEventJSON) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("\n  " + e.String())
	}
	return b.String()
}

// scoreEvents, voidScoreEvents and rebuildLeaderboard need the admin role (UNAUTHENTICATED without a key,
// FORBIDDEN with the submit key), and are BAD_USER_INPUT on a server without the ledger.
func TestLedgerFieldsNeedAdminAndLedger(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	on := startServer(t, ledgerConfig(t, clock))
	on.create(t, map[string]any{"id": "b"})
	on.submit(t, map[string]any{"board": "b", "playerId": "p", "score": 1, "eventId": "e"})
	off := startServer(t, testConfig(t))
	off.create(t, map[string]any{"id": "b"})
	calls := []struct {
		query string
		vars  map[string]any
	}{
		{scoreEventsQuery, map[string]any{"b": "b", "p": "p"}},
		{voidMutation, map[string]any{"b": "b", "ids": []string{"e"}, "r": "fraud"}},
		{rebuildMutation, map[string]any{"id": "b"}},
	}
	for _, c := range calls {
		on.wantCode(t, "", "UNAUTHENTICATED", c.query, c.vars)
		on.wantCode(t, testSubmitKey, "FORBIDDEN", c.query, c.vars)
		off.wantCode(t, "", "UNAUTHENTICATED", c.query, c.vars)
		off.wantCode(t, testSubmitKey, "FORBIDDEN", c.query, c.vars)
		off.wantCode(t, testAdminKey, "BAD_USER_INPUT", c.query, c.vars)
		var out struct {
			ScoreEvents        *scoreEventPageJSON
			VoidScoreEvents    *int
			RebuildLeaderboard *bool
		}
		on.must(t, testAdminKey, c.query, c.vars, &out)
		switch {
		case out.ScoreEvents != nil && (len(out.ScoreEvents.Events) != 1 || out.ScoreEvents.Events[0].Voided):
			t.Errorf("scoreEvents: %+v", out.ScoreEvents)
		case out.VoidScoreEvents != nil && *out.VoidScoreEvents != 1: // the refused calls voided nothing
			t.Errorf("voidScoreEvents = %d, want 1", *out.VoidScoreEvents)
		case out.RebuildLeaderboard != nil && !*out.RebuildLeaderboard:
			t.Error("rebuildLeaderboard = false")
		}
	}
}

// scoreEvents lists a player's submissions oldest first, page by page (first / after / next), each with every
// field as submitted: the client's eventId or '#<seq>' for one sent without, the player, the score (a SUM
// board's delta), achievedAt (as sent, or the recording moment), recordedAt (the server's clock when the ledger
// recorded it), voided and voidReason. Retries, refused items and other players' events are not listed; voided
// events stay listed, marked, with the reason.
func TestLedgerScoreEvents(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	s := startServer(t, ledgerConfig(t, clock))
	s.create(t, map[string]any{"id": "fraud", "mode": "SUM"}) // seq 1
	seq := int64(1)
	var want []scoreEventJSON // p's events, in order
	at := func(i int) time.Time { return ledgerStart.Add(time.Duration(i) * time.Minute) }
	for i := range 5 {
		clock.Set(at(i).Add(123 * time.Millisecond))
		in := map[string]any{"board": "fraud", "playerId": "p", "score": float64(10*i) + 0.5}
		e := scoreEventJSON{PlayerID: "p", Score: float64(10*i) + 0.5, RecordedAt: clock.Now(), AchievedAt: clock.Now()}
		seq++
		e.EventID = "#" + strconv.FormatInt(seq, 10)
		if i%2 == 0 {
			in["eventId"] = fmt.Sprintf("p-%d", i)
			e.EventID = fmt.Sprintf("p-%d", i)
		}
		if i == 1 {
			e.AchievedAt = clock.Now().Add(-42*time.Second - 7*time.Millisecond)
			in["achievedAt"] = e.AchievedAt.Format(time.RFC3339Nano)
		}
		s.submit(t, in)
		want = append(want, e)
		// Another player's event between p's.
		s.submit(t, map[string]any{"board": "fraud", "playerId": "q", "score": 1, "eventId": fmt.Sprintf("q-%d", i)})
		seq++
	}
	// A retry of p-0 and a refused submission change nothing; a bulk call records its items at one moment.
	clock.Set(at(10))
	s.wantCode(t, testSubmitKey, "BAD_USER_INPUT", submitMutation,
		map[string]any{"in": map[string]any{"board": "fraud", "playerId": "p", "score": 1e300}})
	var bulk struct{ SubmitScores []scoreResult }
	s.must(t, testSubmitKey, submitsMutation, map[string]any{"in": []map[string]any{
		{"board": "fraud", "playerId": "p", "score": 0.5, "eventId": "p-0"},
		{"board": "fraud", "playerId": "p", "score": -3, "eventId": "p-bulk"},
		{"board": "fraud", "playerId": "q", "score": 2},
		{"board": "fraud", "playerId": "p", "score": 7},
	}}, &bulk)
	if len(bulk.SubmitScores) != 4 || !bulk.SubmitScores[0].Duplicate || bulk.SubmitScores[1].Duplicate {
		t.Fatalf("bulk: %+v", bulk.SubmitScores)
	}

	want = append(want,
		scoreEventJSON{EventID: "p-bulk", PlayerID: "p", Score: -3, AchievedAt: at(10), RecordedAt: at(10)},
		scoreEventJSON{EventID: "#" + strconv.FormatInt(seq+3, 10), PlayerID: "p", Score: 7, AchievedAt: at(10),
			RecordedAt: at(10)})
	seq += 3

	for _, first := range []int{1, 2, 3, 7, 100} {
		if got := renderEvents(s.allScoreEvents(t, "fraud", "p", first)); got != renderEvents(want) {
			t.Fatalf("scoreEvents of p, %d a page:%s\nwant:%s", first, got, renderEvents(want))
		}
	}
	if p := s.scoreEvents(t, "fraud", "p", 7, nil); len(p.Events) != 7 || p.Next != nil {
		t.Errorf("a page that takes the last event has no next: %d events, next %v", len(p.Events), p.Next)
	}
	if q := s.allScoreEvents(t, "fraud", "q", 2); len(q) != 6 || q[5].EventID != "#"+strconv.FormatInt(seq-1, 10) {
		t.Errorf("q's events:%s", renderEvents(q))
	}
	if p := s.scoreEvents(t, "fraud", "nobody", 10, nil); len(p.Events) != 0 || p.Next != nil {
		t.Errorf("a player without events: %+v", p)
	}

	// Voided by the client's eventId and by '#<seq>': listed, marked, with the reason; the total loses them.
	clock.Set(at(20))
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "fraud", "ids": []string{"p-2", want[3].EventID},
		"r": "speed hack ✓"}, &n)
	if n.VoidScoreEvents != 2 {
		t.Fatalf("voided %d, want 2", n.VoidScoreEvents)
	}
	reason := "speed hack ✓"
	for _, i := range []int{2, 3} {
		want[i].Voided, want[i].VoidReason = true, &reason
	}
	if got := renderEvents(s.allScoreEvents(t, "fraud", "p", 3)); got != renderEvents(want) {
		t.Fatalf("scoreEvents after the void:%s\nwant:%s", got, renderEvents(want))
	}
	total := 0.0
	for _, e := range want {
		if !e.Voided {
			total += e.Score
		}
	}
	var rank struct{ Rank *entry }
	s.must(t, "", `{ rank(board: "fraud", playerId: "p") { score } }`, nil, &rank)
	if rank.Rank == nil || rank.Rank.Score != total {
		t.Errorf("p's total after the void: %+v, want %v", rank.Rank, total)
	}

	for _, bad := range []map[string]any{
		{"b": "fraud", "p": "p", "n": 0},
		{"b": "fraud", "p": "p", "n": 1001},
		{"b": "fraud", "p": "p", "n": 10, "after": "x"},
		{"b": "fraud", "p": "p", "n": 10, "after": "-1"},
		{"b": "fraud", "p": "", "n": 10},
	} {
		s.wantCode(t, testAdminKey, "BAD_USER_INPUT", scoreEventsQuery, bad)
	}
	s.wantCode(t, testAdminKey, "NOT_FOUND", scoreEventsQuery, map[string]any{"b": "nothing", "p": "p"})
}

// voidScoreEvents on a SUM and a BEST board: the player's standing is recomputed from the events that remain
// (a SUM total loses the delta, a BEST score falls back to the best remaining, a player whose only event is
// voided leaves the board), the other players move accordingly, a topUpdates subscriber's list follows (it ends
// equal to the board, every field, without the voided score), and voiding again is a no-op (0).
func TestLedgerVoid(t *testing.T) {
	t.Parallel()
	ledgerTargets(t, testLedgerVoid)
}

func testLedgerVoid(t *testing.T, clock *closeClock, cfg Config) {
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "sum", "mode": "SUM"})
	s.create(t, map[string]any{"id": "best"})
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	lists := map[string]*liveList{"sum": {first: 10}, "best": {first: 10}}
	pump(t, conn, lists)
	for id := range lists {
		if err := conn.Subscribe(id, topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
			t.Fatal(err)
		}
	}
	step := 0
	submit := func(board, player string, score float64, eventID string) {
		step++
		clock.Set(ledgerStart.Add(time.Duration(step) * time.Second))
		in := map[string]any{"board": board, "playerId": player, "score": score, "displayName": "N " + player}
		if eventID != "" {
			in["eventId"] = eventID
		}
		s.submit(t, in)
	}
	submit("sum", "cheat", 5, "c1")
	submit("sum", "a", 50, "")
	submit("sum", "cheat", 1000, "c2")
	submit("sum", "b", 40, "")
	submit("sum", "cheat", 3, "c3")
	submit("best", "x", 100, "x1")
	submit("best", "y", 80, "")
	submit("best", "x", 70, "x2")
	submit("best", "z", 90, "z1")
	for id, l := range lists {
		waitLive(t, s, l, id, 10*time.Second)
	}
	if got := ids(s.top(t, "sum", 10)); got != "cheat:1 a:2 b:3" {
		t.Fatalf("sum before the void: %s", got)
	}
	if got := lists["sum"].rows(); !strings.Contains(got, "cheat name=\"N cheat\" rank=1 tie=1 approx=false score=1008") {
		t.Fatalf("the subscriber's list of sum before the void:\n%s", got)
	}

	void := func(board string, eventIDs []string, want int) {
		t.Helper()
		var out struct{ VoidScoreEvents int }
		s.must(t, testAdminKey, voidMutation, map[string]any{"b": board, "ids": eventIDs, "r": "review #7"}, &out)
		if out.VoidScoreEvents != want {
			t.Fatalf("voidScoreEvents(%s, %v) = %d, want %d", board, eventIDs, out.VoidScoreEvents, want)
		}
	}
	scores := func(board string) string {
		var out []string
		for _, e := range s.top(t, board, 10) {
			out = append(out, fmt.Sprintf("%s:%d:%v:%s", e.PlayerID, e.Rank, e.Score, *e.DisplayName))
		}
		return strings.Join(out, " ")
	}
	void("sum", []string{"c2"}, 1)
	if got := scores("sum"); got != "a:1:50:N a b:2:40:N b cheat:3:8:N cheat" {
		t.Errorf("sum after voiding c2: %s", got)
	}
	void("best", []string{"x1", "z1"}, 2)
	if got := scores("best"); got != "y:1:80:N y x:2:70:N x" {
		t.Errorf("best after voiding x1 and z1: %s", got)
	}
	var z struct {
		Rank        *entry
		Leaderboard struct{ Size int }
	}
	s.must(t, "", `{ rank(board: "best", playerId: "z") { rank } leaderboard(id: "best") { size } }`, nil, &z)
	if z.Rank != nil || z.Leaderboard.Size != 2 {
		t.Errorf("z, whose only event was voided: rank %+v, board size %d (want no rank, size 2)", z.Rank,
			z.Leaderboard.Size)
	}
	for id, l := range lists {
		waitLive(t, s, l, id, 10*time.Second)
	}
	if got := lists["sum"].rows(); strings.Contains(got, "score=1008") || !strings.Contains(got, "cheat name=\"N cheat\" rank=3") {
		t.Errorf("the subscriber's list of sum after the void:\n%s", got)
	}

	// Again: nothing more is voided, and nothing changes.
	void("sum", []string{"c2"}, 0)
	void("best", []string{"x1", "z1", "no-such-event"}, 0)
	if got := scores("sum"); got != "a:1:50:N a b:2:40:N b cheat:3:8:N cheat" {
		t.Errorf("sum after voiding again: %s", got)
	}
	s.wantCode(t, testAdminKey, "BAD_USER_INPUT", voidMutation, map[string]any{"b": "sum", "ids": []string{}, "r": "x"})
	s.wantCode(t, testAdminKey, "BAD_USER_INPUT", voidMutation, map[string]any{"b": "sum", "ids": []string{"c1"}, "r": ""})
	s.wantCode(t, testAdminKey, "NOT_FOUND", voidMutation, map[string]any{"b": "none", "ids": []string{"c1"}, "r": "x"})
}

// boardDump renders every entry of each view (a window and period of a board) as st reads it from Redis, every
// field (liveRows), page by page.
func boardDump(t *testing.T, st *leaderboard.Store, views ...leaderboard.View) string {
	t.Helper()
	var b strings.Builder
	for _, v := range views {
		for offset := 0; ; offset += leaderboard.MaxFirst {
			p, err := st.Top(ctxT(t, 10*time.Second), v, offset, leaderboard.MaxFirst)
			if err != nil {
				t.Fatalf("top of %+v at %d: %v", v, offset, err)
			}
			b.WriteString(liveRows(p.Board, string(p.Window), p.Period, p.Size, p.Entries,
				func(e leaderboard.Entry) float64 { return e.TopPercent }) + "\n")
			if len(p.Entries) < leaderboard.MaxFirst {
				break
			}
		}
	}
	return b.String()
}

// rebuildLeaderboard rebuilds a board from the ledger into fresh keys: afterwards every entry of every window
// has every field as before (tie order, names, metadata, updatedAt, SUM totals, a removed player stays removed);
// a board the ledger does not hold is NOT_FOUND. A board whose keys Redis lost answers UNAVAILABLE until it is
// restored, whole, on its own.
func TestLedgerRebuild(t *testing.T) {
	t.Parallel()
	ledgerTargets(t, testLedgerRebuild)
}

func testLedgerRebuild(t *testing.T, clock *closeClock, cfg Config) {
	s := startServer(t, cfg)
	// A day of grace: no period closes while the test runs (the clock reaches the second day's 09:03), so the
	// removal at i = 30 takes p4 out of both days. Without it the server's close checks, on their own timer,
	// sometimes closed the first day before the removal, which then kept p4 there (closed periods are final).
	s.create(t, map[string]any{"id": "r", "mode": "SUM", "windows": []string{"ALL_TIME", "DAILY"}, "graceSeconds": 86400})
	for i := range 40 {
		clock.Set(ledgerStart.Add(time.Duration(i) * 37 * time.Minute)) // across two days
		in := map[string]any{"board": "r", "playerId": fmt.Sprintf("p%d", i%13), "score": float64(i%5) - 1}
		if i%3 == 0 {
			in["displayName"] = fmt.Sprintf("Name %d", i)
		}
		if i%4 == 0 {
			in["metadata"] = map[string]any{"i": i, "s": "<&>"}
		}
		s.submit(t, in)
		if i == 30 {
			s.must(t, testAdminKey, `mutation { removePlayer(board: "r", playerId: "p4") }`, nil, nil)
		}
	}
	views := []leaderboard.View{{Board: "r", Window: leaderboard.AllTime}, // the store's clock is not the server's
		{Board: "r", Window: leaderboard.Daily, Period: "2031-03-14"},
		{Board: "r", Window: leaderboard.Daily, Period: "2031-03-15"}}
	before := boardDump(t, s.Store, views...)
	if strings.Count(before, "\n  ") != 12+12+12 || !strings.Contains(before, "rank=2 tie=1") { // p4 removed from every period
		t.Fatalf("the board before:\n%s", before)
	}
	var out struct{ RebuildLeaderboard bool }
	s.must(t, testAdminKey, rebuildMutation, map[string]any{"id": "r"}, &out)
	if !out.RebuildLeaderboard {
		t.Fatal("rebuildLeaderboard = false")
	}
	if after := boardDump(t, s.Store, views...); after != before {
		t.Fatalf("after the rebuild:\n%s\nbefore:\n%s", after, before)
	}

	// Redis loses the board's keys: a read answers UNAVAILABLE (never NOT_FOUND: the ledger holds the board) and
	// starts its restore; once the board answers again, it is whole.
	s.must(t, "", `{ leaderboard(id: "r") { id } }`, nil, nil) // the server caches the definition
	deleteBoardKeys(t, s, "r")
	// The first read is of the board's definition, which the server has cached: UNAVAILABLE as well, not null.
	s.wantCode(t, "", "UNAVAILABLE", `{ leaderboard(id: "r") { id } }`, nil)
	s.doAvailable(t, `{ top(board: "r") { playerId } }`, nil)
	if after := boardDump(t, s.Store, views...); after != before {
		t.Fatalf("restored after its keys were lost:\n%s\nbefore:\n%s", after, before)
	}
	s.wantCode(t, testAdminKey, "NOT_FOUND", rebuildMutation, map[string]any{"id": "none"})
}

// deleteBoardKeys deletes every key of a board from the server's Redis (standalone or cluster).
func deleteBoardKeys(t *testing.T, s *testServer, board string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	n := 0
	del := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, s.Store.BoardKeys(board)).Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		n += len(keys)
		return loseKeys(ctx, c, keys)
	}
	var err error
	switch c := s.App.rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return del(ctx, c)
		})
	case *redis.Client:
		err = del(ctx, c)
	default:
		t.Fatalf("the server's Redis client is a %T", c)
	}
	if err != nil || n == 0 {
		t.Fatalf("deleting the keys of %s: %d keys, %v", board, n, err)
	}
}

// loseKeys deletes keys as Redis loses them, at once: one DEL a slot (a cluster node takes the keys of one slot
// at a time), all sent in one round trip. A DEL a key, each waiting for the last, let the servers start restoring
// a board meanwhile and then took keys that restore had written, a loss no Redis has (a restore resumed over a
// board missing part of itself).
func loseKeys(ctx context.Context, c *redis.Client, keys []string) error {
	bySlot := map[int][]string{}
	for _, k := range keys {
		bySlot[leaderboard.HashSlot(k)] = append(bySlot[leaderboard.HashSlot(k)], k)
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, ks := range bySlot {
			p.Del(ctx, ks...)
		}
		return nil
	})
	return err
}

// redisClient is a client of the test's own to the server's (standalone) Redis.
func redisClient(t *testing.T, s *testServer) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(s.App.cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// With the ledger on, the write mutations answer as the contract says (the core suite's scenarios, and seasons
// and deletion below), and each one is in the ledger when it has answered.
func TestLedgerWrites(t *testing.T) {
	t.Parallel()
	ledgerTargets(t, testLedgerWrites)
}

func testLedgerWrites(t *testing.T, clock *closeClock, cfg Config) {
	s := startServer(t, cfg)
	coreSuite(t, s)
	pool := ledgerPool(t, cfg.DatabaseURL)
	const (
		create = leaderboard.EventCreate
		submit = leaderboard.EventSubmit
		remove = leaderboard.EventRemove
		start  = leaderboard.EventSeasonStart
		end    = leaderboard.EventSeasonEnd
	)
	kinds := func(board string) string { return fmt.Sprint(ledgerKinds(t, pool, board)) }
	// coreSuite's "rm": created, two submissions, a removal (the second removal, of nobody, is recorded too).
	if got, want := kinds("rm"), fmt.Sprint([]leaderboard.EventKind{create, submit, submit, remove, remove}); got != want {
		t.Errorf("rm in the ledger: %s, want %s", got, want)
	}
	// "dedupe": the retry of e1 is not recorded again.
	if got, want := kinds("dedupe"), fmt.Sprint([]leaderboard.EventKind{create, submit}); got != want {
		t.Errorf("dedupe in the ledger: %s, want %s", got, want)
	}
	// "reads": the create and its 20 items; and, when the close check ran before this count, the close of the
	// DAILY periods that ended before the board was created (nobody played them, but every closed period is fenced,
	// and with the ledger the fence is an event).
	ks := ledgerKinds(t, pool, "reads")
	if n := len(ks); n > 0 && ks[n-1] == leaderboard.EventClose {
		ks = ks[:n-1]
	}
	if got, want := fmt.Sprint(ks), fmt.Sprint(append([]leaderboard.EventKind{create}, slices.Repeat(
		[]leaderboard.EventKind{submit}, 20)...)); got != want {
		t.Errorf("reads in the ledger: %s, want %s (the create and 20 items)", got, want)
	}

	// Seasons: start (a retry changes nothing), a score, end (again: nothing), each in the ledger.
	s.create(t, map[string]any{"id": "league", "windows": []string{"SEASON", "ALL_TIME"}})
	const startSeason = `mutation($b: ID!, $id: String!, $e: Time!) { startSeason(board: $b, id: $id, endsAt: $e) {
		season { id running } changed closed { id } } }`
	const endSeason = `mutation($b: ID!) { endSeason(board: $b) { season { id running } changed closed { id } } }`
	ends := clock.Now().Add(30 * 24 * time.Hour).Format(time.RFC3339)
	var st struct{ StartSeason, EndSeason seasonChangeJSON }
	s.must(t, testAdminKey, startSeason, map[string]any{"b": "league", "id": "s1", "e": ends}, &st)
	if !st.StartSeason.Changed || st.StartSeason.Season.ID != "s1" || !st.StartSeason.Season.Running {
		t.Errorf("startSeason: %+v", st.StartSeason)
	}
	s.must(t, testAdminKey, startSeason, map[string]any{"b": "league", "id": "s1", "e": ends}, &st)
	if st.StartSeason.Changed {
		t.Errorf("startSeason retried: %+v", st.StartSeason)
	}
	s.submit(t, map[string]any{"board": "league", "playerId": "a", "score": 3})
	var season struct{ Top []entry }
	s.must(t, "", `{ top(board: "league", window: SEASON) { playerId score } }`, nil, &season)
	if len(season.Top) != 1 || season.Top[0].Score != 3 {
		t.Errorf("the season's top: %+v", season.Top)
	}
	clock.Set(clock.Now().Add(time.Hour))
	s.must(t, testAdminKey, endSeason, map[string]any{"b": "league"}, &st)
	if !st.EndSeason.Changed || st.EndSeason.Season.Running || st.EndSeason.Season.ID != "s1" {
		t.Errorf("endSeason: %+v", st.EndSeason)
	}
	s.must(t, testAdminKey, endSeason, map[string]any{"b": "league"}, &st)
	if st.EndSeason.Changed {
		t.Errorf("endSeason again: %+v", st.EndSeason)
	}
	if got, want := kinds("league"), fmt.Sprint([]leaderboard.EventKind{create, start, start, submit, end, end}); got != want {
		t.Errorf("league in the ledger: %s, want %s", got, want)
	}

	// Deletion: true, then false; the ledger holds no live board of the id; created again, it is empty and new.
	var del struct{ DeleteLeaderboard bool }
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "league"}, &del)
	if !del.DeleteLeaderboard {
		t.Error("deleteLeaderboard = false")
	}
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "league"}, &del)
	if del.DeleteLeaderboard {
		t.Error("deleteLeaderboard again = true")
	}
	if got := kinds("league"); got != "[]" {
		t.Errorf("a deleted board in the ledger: %s", got)
	}
	s.wantCode(t, testSubmitKey, "NOT_FOUND", submitMutation,
		map[string]any{"in": map[string]any{"board": "league", "playerId": "a", "score": 1}})
	s.create(t, map[string]any{"id": "league", "windows": []string{"ALL_TIME"}})
	if top := s.top(t, "league", 10); len(top) != 0 {
		t.Errorf("created again: %+v", top)
	}
	if got, want := kinds("league"), fmt.Sprint([]leaderboard.EventKind{create}); got != want {
		t.Errorf("league created again, in the ledger: %s, want %s", got, want)
	}
}

// With the ledger a close event carries version 1 and no reason; a void that changes the closed period's
// standings sends a correction to the webhooks and to periodClosed: version 2, the void's reason, and the top
// without the voided score (a model: the scores but the voided one, descending).
func TestLedgerCloseCorrection(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newHookReceiver(t, 0, nil)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.DatabaseURL = ledgerConfig(t, clock).DatabaseURL
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "cup", "windows": []string{"DAILY"}, "graceSeconds": 60, "closeEventTop": 2})
	for _, sc := range []struct {
		id, event string
		score     float64
	}{{"ann", "a1", 50}, {"bob", "b1", 70}, {"cid", "c1", 60}} {
		s.submit(t, map[string]any{"board": "cup", "playerId": sc.id, "score": sc.score, "eventId": sc.event})
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := conn.Subscribe("c", `subscription($b: ID!) { periodClosed(board: $b) { id size version reason
		top { playerId rank score } } }`, map[string]any{"b": "cup"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)               // the subscription starts (it only sees events recorded after it started)
	clock.Set(day.Add(15*time.Hour + 2*time.Minute)) // the day and its grace are over
	type event struct {
		ID      string
		Size    int
		Version int
		Reason  *string
		Top     []struct {
			PlayerID string
			Rank     int
			Score    float64
		}
	}
	// Delivery is at least once (the README's webhooks): an event seen before, by its id, may come again (the
	// restore below puts back an event whose delivery the ledger had not yet recorded as complete) and is skipped.
	seen := map[string]bool{}
	next := func(want int, size int, reason *string, top ...string) {
		t.Helper()
		var h hookRequest
		var body event
		for body.ID == "" || seen[body.ID] {
			select {
			case h = <-rx.arrived:
			case <-time.After(10 * time.Second):
				t.Fatalf("no webhook of version %d within 10 s", want)
			}
			body = event{}
			if err := json.Unmarshal(h.body, &body); err != nil {
				t.Fatal(err)
			}
		}
		var sub struct{ PeriodClosed event }
		for sub.PeriodClosed.ID == "" || seen[sub.PeriodClosed.ID] {
			sub.PeriodClosed = event{}
			conn.NextData(t, ctxT(t, 10*time.Second), "c", &sub)
		}
		seen[body.ID] = true
		for _, ev := range []event{body, sub.PeriodClosed} {
			if ev.Version != want || ev.Size != size || (ev.Reason == nil) != (reason == nil) ||
				reason != nil && *ev.Reason != *reason || len(ev.Top) != len(top) {
				t.Fatalf("event %s, want version %d size %d reason %v top %v", h.body, want, size, reason, top)
			}
			for i, p := range top {
				if ev.Top[i].PlayerID != p || ev.Top[i].Rank != i+1 {
					t.Fatalf("event %+v: rank %d is not %s", ev, i+1, p)
				}
			}
		}
		if body.ID != sub.PeriodClosed.ID {
			t.Fatalf("webhook id %s, subscription id %s", body.ID, sub.PeriodClosed.ID)
		}
	}
	next(1, 3, nil, "bob", "cid")
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "cup", "ids": []string{"b1"}, "r": "fraud"}, &n)
	if n.VoidScoreEvents != 1 {
		t.Fatalf("voided %d, want 1", n.VoidScoreEvents)
	}
	reason := "fraud"
	next(2, 2, &reason, "cid", "ann")

	// Redis loses the board while another process holds its restore for a while: the subscription's feed finds
	// the board missing for many polls, and goes on (the board is not gone: the ledger holds it) to get the next
	// correction once the board is restored.
	rdb := redisClient(t, s)
	lock := leaderboard.RestoreLockKey(cfg.KeyPrefix, "cup")
	if err := rdb.Set(ctxT(t, 5*time.Second), lock, "another process", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	deleteBoardKeys(t, s, "cup")
	s.wantCode(t, "", "UNAVAILABLE", `{ top(board: "cup") { playerId } }`, nil)
	time.Sleep(500 * time.Millisecond) // 25 polls of the feed (WEBHOOK_POLL_INTERVAL 20 ms) see the board missing
	rdb.Del(ctxT(t, 5*time.Second), lock)
	s.doAvailable(t, `{ top(board: "cup") { playerId } }`, nil)
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "cup", "ids": []string{"c1"}, "r": "fraud"}, &n)
	next(3, 1, &reason, "ann")
}

// Over GraphQL, every read of a closed period answers the same bytes once Redis no longer holds it (its keys
// expired by the clock, then Redis lost the board) as while Redis held it: top, rank, aroundMe, friends, the
// period's size and the periods list, from the frozen standings.
func TestLedgerClosedPeriodReadsOutliveRedis(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "old", "windows": []string{"DAILY"}, "closeEventTop": 3})
	for i := range 30 {
		in := map[string]any{"board": "old", "playerId": fmt.Sprintf("p%02d", i), "score": float64(i % 7)}
		if i%3 == 0 {
			in["displayName"] = fmt.Sprintf("Player %d", i)
		}
		if i%4 == 0 {
			in["metadata"] = map[string]any{"i": i}
		}
		s.submit(t, in)
	}
	const day = "2031-03-14"
	query := `query($p: String!) {
		top(board: "old", window: DAILY, period: $p, first: 50) { playerId displayName rank tieRank score topPercent updatedAt metadata approximate }
		rank(board: "old", window: DAILY, period: $p, playerId: "p07") { rank tieRank score topPercent updatedAt displayName }
		aroundMe(board: "old", window: DAILY, period: $p, playerId: "p29", radius: 3) { playerId rank score }
		friends(board: "old", window: DAILY, period: $p, playerId: "p01", friendIds: ["p13", "nobody", "p27"]) { playerId rank tieRank }
		leaderboard(id: "old") { size(window: DAILY, period: $p) periods(window: DAILY) { period size endedAt } } }`
	clock.Set(ledgerStart.Add(16 * time.Hour)) // the day and its grace are over: it closes and freezes
	waitUntil(t, 10*time.Second, "the day's close event", func() bool {
		evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "old", "0-0", 10)
		return err == nil && len(evs) == 1
	})
	before := s.do(t, "", query, map[string]any{"p": day})
	if len(before.Errors) > 0 || !strings.Contains(string(before.Data), `"p06"`) {
		t.Fatalf("while Redis holds the day: %s %+v", before.Data, before.Errors)
	}
	clock.Set(ledgerStart.Add(10 * 24 * time.Hour)) // past the day's retention (3 days) and grace
	deleteBoardKeys(t, s, "old")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after := s.do(t, "", query, map[string]any{"p": day})
		if len(after.Errors) == 0 {
			if string(after.Data) != string(before.Data) {
				t.Fatalf("from the frozen standings:\n%s\nwhile Redis held the day:\n%s", after.Data, before.Data)
			}
			break
		}
		if c := after.Codes(); len(c) == 0 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) {
			t.Fatalf("reading the closed day while the board is restored: %+v", after.Errors)
		}
	}
	// Redis holds nothing of the day now: the answer came from the ledger.
	if n := countKeys(t, s, "old", ":"+day); n != 0 {
		t.Fatalf("Redis still holds %d keys of the day", n)
	}
}

// countKeys counts the board's keys in the server's (standalone) Redis whose name contains part, its close fence
// left out.
func countKeys(t *testing.T, s *testServer, board, part string) int {
	t.Helper()
	keys, err := redisClient(t, s).Keys(ctxT(t, 5*time.Second), s.Store.BoardKeys(board)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if strings.Contains(k, part) && !strings.Contains(k, ":x:") {
			n++
		}
	}
	return n
}
