package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
)

// Close events survive Redis (README "Durability"): with the ledger, a close event (or a correction) whose webhook
// delivery had not completed when Redis lost the board (here a FLUSHALL of a Redis of the test's own) is sent
// again after the restore, with the id of its first attempt and exactly the frozen standings of its version; a
// delivered one is not sent again.

// flakyReceiver is a webhook endpoint that answers 500 while it is down and 200 otherwise, and records every
// request.
type flakyReceiver struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	reqs []hookRequest
	got  chan hookRequest // every request answered 200
}

func newFlakyReceiver(t *testing.T) *flakyReceiver {
	r := &flakyReceiver{got: make(chan hookRequest, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h := hookRequest{id: req.Header.Get("X-Leaderboard-Event-Id"), body: body, at: time.Now(), status: 200}
		if _, err := verifyWebhook(req.Header.Get("X-Leaderboard-Signature"), body, testWebhookSecret, time.Now(),
			1<<62); err != nil {
			t.Errorf("webhook signature: %v", err)
		}
		if err := json.Unmarshal(body, &h.payload); err != nil {
			t.Errorf("undecodable webhook body %q: %v", body, err)
		}
		if r.down.Load() {
			h.status = http.StatusInternalServerError
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, h)
		r.mu.Unlock()
		if h.status == 200 {
			r.got <- h
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *flakyReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.reqs...)
}

// delivered returns how often each event id was answered 200.
func (r *flakyReceiver) delivered() map[string]int {
	out := map[string]int{}
	for _, h := range r.requests() {
		if h.status == 200 {
			out[h.id]++
		}
	}
	return out
}

// next waits for the next request answered 200.
func (r *flakyReceiver) next(t *testing.T, what string) hookRequest {
	t.Helper()
	select {
	case h := <-r.got:
		return h
	case <-time.After(20 * time.Second):
		t.Fatalf("no delivery of %s within 20 s (requests: %d)", what, len(r.requests()))
		return hookRequest{}
	}
}

// durableSetup starts a server with the ledger, a Redis of the test's own and a webhook to rx, and a board "cup"
// (DAILY, grace 60 s, closeEventTop 2) with three scores on the clock's day; it returns the server, a client of
// its Redis and a pool of its ledger.
// durableConfig is the configuration of a close-event test across a loss of Redis: a redis-server of the test's
// own (flushed), PostgreSQL, a ledger check every 50 ms and webhook retries at most 200 ms apart.
func durableConfig(t *testing.T, clock *closeClock, rx *flakyReceiver) (Config, *redistest.Server) {
	t.Helper()
	own := redistest.Standalone(t)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.RedisURL = "redis://" + own.Addr
	cfg.DatabaseURL = pgtest.Shared(t).Database(t)
	cfg.LedgerCheckInterval = 50 * time.Millisecond
	cfg.Closes.RetryMax = 200 * time.Millisecond
	return cfg, own
}

func durableSetup(t *testing.T, clock *closeClock, rx *flakyReceiver, tweaks ...func(*Config)) (*testServer,
	*redis.Client, *pgxpool.Pool) {
	t.Helper()
	cfg, own := durableConfig(t, clock, rx)
	for _, f := range tweaks {
		f(&cfg)
	}
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "cup", "windows": []string{"DAILY"}, "graceSeconds": 60, "closeEventTop": 2})
	for _, sc := range []struct {
		id, event, name string
		score           float64
	}{{"ann", "a1", "Ann", 50}, {"bob", "b1", "Bob", 70}, {"cid", "c1", "Cid", 60}} {
		s.submit(t, map[string]any{"board": "cup", "playerId": sc.id, "score": sc.score, "eventId": sc.event,
			"displayName": sc.name, "metadata": map[string]any{"team": sc.id + "-team"}})
	}
	rdb := redis.NewClient(&redis.Options{Addr: own.Addr})
	t.Cleanup(func() { rdb.Close() })
	return s, rdb, ledgerPool(t, cfg.DatabaseURL)
}

// flushAndWaitRestored empties the server's Redis and waits until the board reads again (the ledger check
// restores it).
func flushAndWaitRestored(t *testing.T, s *testServer, rdb *redis.Client) {
	t.Helper()
	if err := rdb.FlushAll(ctxT(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := s.do(t, "", `{ top(board: "cup") { playerId } }`, nil)
		if len(r.Errors) == 0 {
			return
		}
		if c := r.Codes(); len(c) != 1 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) {
			t.Fatalf("reading the board while it is restored: %+v", r.Errors)
		}
	}
}

// frozenPayload is what a close event of a version must carry, read from the ledger's closes and standings (the
// first closeEventTop rows): the payload's fields but id, type, board, window and recordedAt.
type frozenPayload struct {
	Period  string
	Size    int64
	EndedAt time.Time
	Version int
	Reason  *string
	Top     []frozenRow
}

type frozenRow struct {
	Rank, TieRank int64
	PlayerID      string
	DisplayName   *string
	Score         float64
	UpdatedAt     time.Time
	Metadata      json.RawMessage
}

func ledgerFrozen(t *testing.T, pool *pgxpool.Pool, board, period string, version, top int) frozenPayload {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	fp := frozenPayload{Period: period, Version: version}
	var ended int64
	var reason string
	if err := pool.QueryRow(ctx, `SELECT c.size, c.ended_ms, c.reason FROM closes c JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL AND c.win = 'DAILY' AND c.period = $2 AND c.version = $3`,
		[]byte(board), period, version).Scan(&fp.Size, &ended, &reason); err != nil {
		t.Fatalf("closes, version %d: %v", version, err)
	}
	fp.EndedAt = time.UnixMilli(ended).UTC()
	if version > 1 {
		fp.Reason = &reason
	}
	rows, err := pool.Query(ctx, `SELECT s.rank, s.tie_rank, s.player, s.name, s.score, s.updated_ms, s.meta
		FROM standings s JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL AND s.win = 'DAILY' AND s.period = $2 AND s.version = $3
		ORDER BY s.rank LIMIT $4`, []byte(board), period, version, top)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r frozenRow
		var player, name []byte
		var updated int64
		var meta *string
		if err := rows.Scan(&r.Rank, &r.TieRank, &player, &name, &r.Score, &updated, &meta); err != nil {
			t.Fatal(err)
		}
		r.PlayerID, r.UpdatedAt = string(player), time.UnixMilli(updated).UTC()
		if name != nil {
			n := string(name)
			r.DisplayName = &n
		}
		r.Metadata = json.RawMessage("null")
		if meta != nil {
			r.Metadata = json.RawMessage(*meta)
		}
		fp.Top = append(fp.Top, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fp
}

// payloadOf reads the fields of a webhook body that frozen standings determine.
func payloadOf(t *testing.T, body []byte) frozenPayload {
	t.Helper()
	var p frozenPayload
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	p.EndedAt = p.EndedAt.UTC()
	for i := range p.Top {
		p.Top[i].UpdatedAt = p.Top[i].UpdatedAt.UTC()
		var m any // compact, as the ledger keeps it
		if err := json.Unmarshal(p.Top[i].Metadata, &m); err != nil {
			t.Fatal(err)
		}
		p.Top[i].Metadata, _ = json.Marshal(m)
	}
	return p
}

func samePayload(t *testing.T, what string, got, want frozenPayload) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("%s:\n got  %s\n want %s (the ledger's frozen standings)", what, g, w)
	}
}

// firstAttempt waits for the first request (any answer) of an event of the given version and returns it.
func firstAttempt(t *testing.T, rx *flakyReceiver, version int) hookRequest {
	t.Helper()
	var h hookRequest
	waitUntil(t, 20*time.Second, "an attempt to deliver the event", func() bool {
		for _, r := range rx.requests() {
			if payloadOf(t, r.body).Version == version {
				h = r
				return true
			}
		}
		return false
	})
	return h
}

// A close event whose webhook kept failing when Redis was flushed is delivered once the board is restored and the
// receiver recovers: the same id as its first attempt, the same body (recordedAt included), every field equal to
// the ledger's frozen standings.
func TestCloseEventSentAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	rx.down.Store(true)
	s, rdb, pool := durableSetup(t, clock, rx)
	clock.Set(day.Add(15*time.Hour + 2*time.Minute)) // the day and its grace are over
	first := firstAttempt(t, rx, 1)
	flushAndWaitRestored(t, s, rdb)
	rx.down.Store(false)
	h := rx.next(t, "the close event after the restore")
	if h.id != first.id || h.payload.ID != first.id {
		t.Fatalf("delivered id %s (body %s), first attempt's %s", h.id, h.payload.ID, first.id)
	}
	if !bytes.Equal(h.body, first.body) {
		t.Fatalf("delivered body\n%s\nfirst attempt's\n%s", h.body, first.body)
	}
	samePayload(t, "the delivered event", payloadOf(t, h.body), ledgerFrozen(t, pool, "cup", "2031-03-14", 1, 2))
}

// A close event delivered before Redis was flushed is not delivered again after the restore: a later close is
// delivered after it (so the restore and its ledger checks have run), and a generous second more (20 ledger
// checks, 50 webhook polls) brings no second delivery.
func TestDeliveredCloseEventNotSentAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	s, rdb, _ := durableSetup(t, clock, rx)
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	h := rx.next(t, "the close event")
	flushAndWaitRestored(t, s, rdb)
	s.submit(t, map[string]any{"board": "cup", "playerId": "dan", "score": 5, "eventId": "d1"})
	clock.Set(day.Add(39*time.Hour + 2*time.Minute)) // the next day closes
	for {
		n := rx.next(t, "the next day's close event")
		if n.id == h.id {
			t.Fatalf("%s delivered again after the restore", h.id)
		}
		if n.payload.Period == "2031-03-15" {
			break
		}
	}
	time.Sleep(time.Second)
	if d := rx.delivered(); d[h.id] != 1 || len(d) != 2 {
		t.Fatalf("deliveries %v, want %s once and the next day's once", d, h.id)
	}
}

// A close event given up (dead-lettered after WEBHOOK_RETRY_FOR) before Redis was flushed completed its delivery:
// it is not sent again after the restore, although the receiver recovered; the next day's close is delivered.
func TestGivenUpCloseEventNotSentAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	rx.down.Store(true)
	s, rdb, pool := durableSetup(t, clock, rx, func(c *Config) { c.Closes.RetryFor = time.Minute })
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	first := firstAttempt(t, rx, 1)
	clock.Set(day.Add(15*time.Hour + 4*time.Minute)) // past WEBHOOK_RETRY_FOR: the next attempt gives up
	waitUntil(t, 20*time.Second, "the give-up in the ledger", func() bool {
		var n int
		err := pool.QueryRow(ctxT(t, 5*time.Second), `SELECT count(*) FROM close_deliveries WHERE outcome = 'gave_up'`).Scan(&n)
		return err == nil && n == 1
	})
	flushAndWaitRestored(t, s, rdb)
	rx.down.Store(false)
	s.submit(t, map[string]any{"board": "cup", "playerId": "dan", "score": 5, "eventId": "d1"})
	clock.Set(day.Add(39*time.Hour + 2*time.Minute))
	if n := rx.next(t, "the next day's close event"); n.id == first.id || n.payload.Period != "2031-03-15" {
		t.Fatalf("delivered %s of %s after the restore, want the next day's", n.id, n.payload.Period)
	}
	time.Sleep(time.Second) // 20 ledger checks, 50 webhook polls
	if d := rx.delivered(); d[first.id] != 0 || len(d) != 1 {
		t.Fatalf("deliveries %v: the given-up %s delivered", d, first.id)
	}
}

// A correction (a void after the close) that was not delivered when Redis was flushed is delivered after the
// restore with its version, reason and standings, and the id of its first attempt; version 1, delivered before,
// is not delivered again.
func TestCorrectionSentAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	s, rdb, pool := durableSetup(t, clock, rx)
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	v1 := rx.next(t, "the close event")
	rx.down.Store(true)
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "cup", "ids": []string{"b1"}, "r": "speed hack"}, &n)
	if n.VoidScoreEvents != 1 {
		t.Fatalf("voided %d, want 1", n.VoidScoreEvents)
	}
	first := firstAttempt(t, rx, 2)
	flushAndWaitRestored(t, s, rdb)
	rx.down.Store(false)
	h := rx.next(t, "the correction after the restore")
	if h.id != first.id || h.id == v1.id {
		t.Fatalf("delivered id %s, the correction's first attempt's %s (version 1's %s)", h.id, first.id, v1.id)
	}
	if !bytes.Equal(h.body, first.body) {
		t.Fatalf("delivered body\n%s\nfirst attempt's\n%s", h.body, first.body)
	}
	want := ledgerFrozen(t, pool, "cup", "2031-03-14", 2, 2)
	if want.Reason == nil || *want.Reason != "speed hack" || want.Top[0].PlayerID != "cid" {
		t.Fatalf("the ledger's version 2: %+v", want)
	}
	samePayload(t, "the delivered correction", payloadOf(t, h.body), want)
	time.Sleep(time.Second) // 20 ledger checks, 50 webhook polls
	if d := rx.delivered(); d[v1.id] != 1 || d[h.id] != 1 || len(d) != 2 {
		t.Fatalf("deliveries %v, want %s and %s once each", d, v1.id, h.id)
	}
}
