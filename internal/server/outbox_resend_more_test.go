package server

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Two servers on one Redis and one ledger, both running ledger checks: a close event whose delivery had not
// completed when Redis was flushed goes out again once, with its first id, whichever server restores the board
// and whichever puts it back into the outbox.
func TestTwoServersResendCloseEventOnce(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	rx.down.Store(true)
	cfg, own := durableConfig(t, clock, rx)
	// The board is created before the servers that check start: a check every 20 ms restores a board found without
	// its definition twice in a row, which one being created under -race on a busy machine may be (it failed so
	// once in make test; the default interval is 5 s).
	creator := startServer(t, func() Config { c := cfg; c.LedgerCheckInterval = time.Hour; return c }())
	creator.create(t, map[string]any{"id": "cup", "windows": []string{"DAILY"}, "graceSeconds": 60, "closeEventTop": 2})
	creator.Shutdown(t)
	cfg.LedgerCheckInterval = 20 * time.Millisecond
	s1, s2 := startServer(t, cfg), startServer(t, cfg)
	for i, p := range []string{"ann", "bob", "cid"} {
		s2.submit(t, map[string]any{"board": "cup", "playerId": p, "score": float64(50 + 10*i), "eventId": p})
	}
	rdb := redis.NewClient(&redis.Options{Addr: own.Addr})
	t.Cleanup(func() { rdb.Close() })
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	first := firstAttempt(t, rx, 1)
	for round := range 3 { // Redis lost three times before the receiver recovers
		flushAndWaitRestored(t, s1, rdb)
		flushAndWaitRestored(t, s2, rdb)
		waitUntil(t, 10*time.Second, "an attempt after the restore", func() bool {
			n := 0
			for _, r := range rx.requests() {
				if r.id != first.id {
					t.Fatalf("round %d: an attempt with id %s, the first attempt's %s", round, r.id, first.id)
				}
				n++
			}
			return n > round+1
		})
	}
	rx.down.Store(false)
	h := rx.next(t, "the close event")
	if h.id != first.id {
		t.Fatalf("delivered %s, first attempt %s", h.id, first.id)
	}
	time.Sleep(1500 * time.Millisecond) // 75 ledger checks a server
	if d := rx.delivered(); len(d) != 1 || d[first.id] != 1 {
		t.Fatalf("deliveries %v, want %s once", d, first.id)
	}
	n, _ := rdb.XLen(ctxT(t, 5*time.Second), outboxKeyOf(t, cfg, "cup")).Result()
	if n != 1 {
		t.Fatalf("the outbox holds %d entries after the resends, want 1", n)
	}
}

// A sharded board's (shards: 3) close event whose webhook kept failing when Redis was flushed is delivered after
// the restore with the id of its first attempt and its body.
func TestShardedCloseEventSentAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	rx.down.Store(true)
	cfg, own := durableConfig(t, clock, rx)
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "cup", "windows": []string{"DAILY"}, "graceSeconds": 60, "closeEventTop": 5,
		"shards": 3})
	for i, p := range []string{"ann", "bob", "cid", "dan", "eve", "fay"} {
		s.submit(t, map[string]any{"board": "cup", "playerId": p, "score": float64(50 + 10*i), "eventId": p})
	}
	rdb := redis.NewClient(&redis.Options{Addr: own.Addr})
	t.Cleanup(func() { rdb.Close() })
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	first := firstAttempt(t, rx, 1)
	if p := payloadOf(t, first.body); len(p.Top) != 5 {
		t.Fatalf("first attempt: %s", first.body)
	}
	flushAndWaitRestored(t, s, rdb)
	rx.down.Store(false)
	h := rx.next(t, "the close event after the restore")
	if h.id != first.id || string(h.body) != string(first.body) {
		t.Fatalf("delivered %s\n%s\nfirst attempt %s\n%s", h.id, h.body, first.id, first.body)
	}
	time.Sleep(time.Second)
	if d := rx.delivered(); len(d) != 1 || d[first.id] != 1 {
		t.Fatalf("deliveries %v, want %s once", d, first.id)
	}
}

// outboxKeyOf is the key of a board's outbox stream in cfg's Redis.
func outboxKeyOf(t *testing.T, cfg Config, board string) string {
	t.Helper()
	return leaderboard.KeyBase(cfg.KeyPrefix, board) + "o"
}

// More close events of one board waiting for a receiver that is down than its outbox keeps (OutboxMaxLen, 100):
// the outbox trims the oldest; they are put back once, and then the outbox stays as it is while nothing new
// closes. (A resend that trims another waiting event, which the next check puts back, which trims another, ...
// would rewrite the outbox at every ledger check for as long as the receiver is down.)
func TestResendDoesNotChurnAFullOutbox(t *testing.T) {
	t.Parallel()
	day := ledgerStart.Truncate(24 * time.Hour)
	clock := &closeClock{t: day.Add(12 * time.Hour)}
	rx := newFlakyReceiver(t)
	rx.down.Store(true)
	own := redistest.Standalone(t)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.RedisURL = "redis://" + own.Addr
	cfg.DatabaseURL = pgtest.Shared(t).Database(t)
	cfg.LedgerCheckInterval = 20 * time.Millisecond
	// An attempt a second per waiting event (claimed again once idle that long).
	cfg.Closes.RetryMin, cfg.Closes.RetryMax, cfg.Closes.ClaimIdle = time.Second, time.Second, time.Second
	cfg.Closes.Timeout = 500 * time.Millisecond
	cfg.Closes.RetryFor = 1000 * 24 * time.Hour // the test's clock moves 106 days: nothing is given up
	// Created before the server that checks every 20 ms starts (see TestTwoServersResendCloseEventOnce).
	creator := startServer(t, func() Config { c := cfg; c.LedgerCheckInterval = time.Hour; return c }())
	creator.create(t, map[string]any{"id": "many", "windows": []string{"DAILY"}, "graceSeconds": 60, "retention": 400})
	creator.Shutdown(t)
	s := startServer(t, cfg)
	rdb := redis.NewClient(&redis.Options{Addr: own.Addr})
	t.Cleanup(func() { rdb.Close() })
	key := outboxKeyOf(t, cfg, "many")
	pool := ledgerPool(t, cfg.DatabaseURL)
	const days = 106
	for i := range days + 1 {
		clock.Set(day.Add(time.Duration(i)*24*time.Hour + 12*time.Hour))
		if i > 0 {
			waitUntil(t, 10*time.Second, "the previous day's close", func() bool {
				var n int
				err := pool.QueryRow(ctxT(t, 5*time.Second),
					`SELECT count(*) FROM closes WHERE outbox_id IS NOT NULL`).Scan(&n)
				return err == nil && n == i
			})
		}
		if i < days {
			s.submit(t, map[string]any{"board": "many", "playerId": "p", "score": float64(i + 1)})
		}
	}
	lastID := func() string {
		m, err := rdb.XRevRangeN(ctxT(t, 5*time.Second), key, "+", "-", 1).Result()
		if err != nil || len(m) == 0 {
			t.Fatalf("outbox: %v %v", m, err)
		}
		return m[0].ID
	}
	time.Sleep(500 * time.Millisecond) // 25 ledger checks: the trimmed ones are back
	a := lastID()
	time.Sleep(time.Second) // 50 more
	if b := lastID(); b != a {
		n, _ := rdb.XLen(ctxT(t, 5*time.Second), key).Result()
		t.Fatalf("the outbox (%d entries) got new entries for a second while nothing closed: last id %s, then %s",
			n, a, b)
	}
	// The receiver recovers: every close event is delivered, once each, with its first id.
	rx.down.Store(false)
	waitUntil(t, 20*time.Second, "every close event delivered", func() bool { return len(rx.delivered()) >= days })
	time.Sleep(500 * time.Millisecond)
	periods := map[string]bool{}
	for id, n := range rx.delivered() {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	for _, r := range rx.requests() {
		if r.status == 200 {
			periods[r.payload.Period] = true
		}
	}
	if len(periods) != days || len(rx.delivered()) != days {
		t.Fatalf("%d periods delivered under %d ids, want %d", len(periods), len(rx.delivered()), days)
	}
}
