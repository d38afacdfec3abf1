package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

const testWebhookSecret = "test-webhook-secret"

// closeClock is the injected clock of the close tests.
type closeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *closeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *closeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// hookPayload is the test's own reading of a webhook body.
type hookPayload struct {
	ID, Type, Board, Window, Period string
	Size                            int64
	EndedAt, RecordedAt             time.Time
	Top                             []struct {
		Rank        int64
		TieRank     int64
		PlayerID    string
		DisplayName *string
		Score       float64
		TopPercent  float64
		Approximate bool
		UpdatedAt   time.Time
		Metadata    json.RawMessage
	}
}

// verifyWebhook checks a webhook request as the README tells receivers to, written here without the server's
// code: the signature header's t and v1, v1 the hex HMAC-SHA256 with the secret of t, "." and the raw body,
// compared in constant time, and t at most tolerance away from now. It returns t.
func verifyWebhook(header string, body []byte, secret string, now time.Time, tolerance time.Duration) (int64, error) {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return 0, fmt.Errorf("signature header %q: no t and v1", header)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
		return t, fmt.Errorf("signature header %q: v1 does not match", header)
	}
	if age := now.Sub(time.Unix(t, 0)); age > tolerance || age < -tolerance {
		return t, fmt.Errorf("signature header %q: timestamp %s away from now", header, age)
	}
	return t, nil
}

// hookRequest is one request a receiver got.
type hookRequest struct {
	id, signature, timestamp string
	attempt                  int
	sigOK                    bool  // the signature verified here (verifyWebhook), for the time it names
	signedAt                 int64 // the signature's t
	body                     []byte
	payload                  hookPayload
	at                       time.Time
	status                   int // what the receiver answered (0: the sender hung up first)
}

// hookReceiver is a local webhook endpoint that checks signatures itself and records every request. It answers
// 500 to the first failFirst requests and, when hold is set, holds the first request until hold is closed or the
// sender hangs up.
type hookReceiver struct {
	srv       *httptest.Server
	failFirst int
	hold      chan struct{}
	arrived   chan hookRequest // every request, as it arrives
	arrivals  atomic.Int64     // requests that reached the handler: the first is held, the first failFirst fail
	mu        sync.Mutex
	reqs      []hookRequest
}

func newHookReceiver(t *testing.T, failFirst int, hold chan struct{}) *hookReceiver {
	r := &hookReceiver{failFirst: failFirst, hold: hold, arrived: make(chan hookRequest, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h := hookRequest{id: req.Header.Get("X-Leaderboard-Event-Id"), signature: req.Header.Get("X-Leaderboard-Signature"),
			timestamp: req.Header.Get("X-Leaderboard-Timestamp"), body: body, at: time.Now()}
		// The tests' servers run on injected clocks: the age is checked where a test knows the clock.
		var err error
		h.signedAt, err = verifyWebhook(h.signature, body, testWebhookSecret, time.Now(), 1<<62)
		h.sigOK = err == nil && h.timestamp == strconv.FormatInt(h.signedAt, 10) && req.Method == http.MethodPost &&
			req.Header.Get("Content-Type") == "application/json"
		h.attempt, _ = strconv.Atoi(req.Header.Get("X-Leaderboard-Attempt"))
		if err := json.Unmarshal(body, &h.payload); err != nil {
			t.Errorf("undecodable webhook body %q: %v", body, err)
		}
		n := int(r.arrivals.Add(1))
		h.status = http.StatusOK
		if n <= r.failFirst {
			h.status = http.StatusInternalServerError
		}
		if r.hold != nil && n == 1 {
			r.arrived <- h
			select {
			case <-r.hold:
			case <-req.Context().Done():
				h.status = 0
			}
		} else {
			r.arrived <- h
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, h)
		r.mu.Unlock()
		w.WriteHeader(max(h.status, http.StatusOK))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// requests returns the requests answered so far.
func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// delivered returns how often each event id was answered with 200.
func (r *hookReceiver) delivered() map[string]int {
	out := map[string]int{}
	for _, h := range r.requests() {
		if h.status == http.StatusOK {
			out[h.id]++
		}
	}
	return out
}

// closeTestConfig is testConfig with the clock and fast close checks and webhook timings.
func closeTestConfig(t *testing.T, clock *closeClock, urls ...string) Config {
	cfg := testConfig(t)
	cfg.Clock = clock.Now
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	cfg.Closes.URLs = urls
	cfg.Closes.Secret = testWebhookSecret
	cfg.Closes.PollInterval = 20 * time.Millisecond
	cfg.Closes.RetryMin = 40 * time.Millisecond
	cfg.Closes.Timeout = 2 * time.Second
	cfg.Closes.ClaimIdle = 10 * time.Second
	return cfg
}

// webhookGroup is the consumer group of a URL, computed here as the README states it.
func webhookGroup(url string) string {
	h := sha256.Sum256([]byte(url))
	return "wh:" + hex.EncodeToString(h[:8])
}

// waitUntil polls cond every 10 ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pendingCount is how many events of board the URL's group read and did not acknowledge (read from Redis).
func pendingCount(t *testing.T, s *leaderboard.Store, board, url string) int {
	t.Helper()
	p, err := s.OutboxPending(context.Background(), board, webhookGroup(url), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(p)
}

const periodClosedSub = `subscription($b: ID!) { periodClosed(board: $b) { id board window period size endedAt
	top { playerId displayName rank approximate score topPercent updatedAt metadata } } }`

// A daily period closes once its grace window has passed: a webhook gets one POST whose signature verifies with
// the secret, whose idempotency id header is the payload's id, and whose payload carries the board, window,
// period, size, end and the first closeEventTop ranks as a model ranking computes them; a periodClosed
// subscription gets the same event. Nothing is sent inside the grace window, nor a second time.
func TestPeriodCloseWebhookAndSubscription(t *testing.T) {
	t.Parallel()
	day := time.Date(2031, 5, 20, 10, 0, 0, 0, time.UTC)
	clock := &closeClock{t: day}
	rx := newHookReceiver(t, 0, nil)
	s := startServer(t, closeTestConfig(t, clock, rx.srv.URL))
	s.create(t, map[string]any{"id": "cup", "windows": []string{"DAILY"}, "graceSeconds": 60, "closeEventTop": 2})
	var def struct{ Leaderboard struct{ CloseEventTop int } }
	s.must(t, "", `{ leaderboard(id: "cup") { closeEventTop } }`, nil, &def)
	if def.Leaderboard.CloseEventTop != 2 {
		t.Fatalf("closeEventTop %d", def.Leaderboard.CloseEventTop)
	}
	names := map[string]string{"ann": "Ann"}
	scores := []struct {
		id    string
		score float64
	}{{"ann", 50}, {"bob", 70}, {"cid", 50}, {"dan", 10}}
	for _, sc := range scores {
		in := map[string]any{"board": "cup", "playerId": sc.id, "score": sc.score}
		if n, ok := names[sc.id]; ok {
			in["displayName"] = n
		}
		s.submit(t, in)
	}
	// The model: descending, ties by first arrival.
	model := slices.Clone(scores)
	slices.SortStableFunc(model, func(a, b struct {
		id    string
		score float64
	}) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return 0
	})
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := conn.Subscribe("c", periodClosedSub, map[string]any{"b": "cup"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the subscription starts (it only sees events recorded after it started)

	clock.Set(time.Date(2031, 5, 21, 0, 0, 30, 0, time.UTC)) // inside the grace window
	select {
	case h := <-rx.arrived:
		t.Fatalf("a webhook inside the grace window: %s", h.body)
	case <-time.After(500 * time.Millisecond): // 25 close checks
	}
	clock.Set(time.Date(2031, 5, 21, 0, 1, 0, 0, time.UTC))
	var h hookRequest
	select {
	case h = <-rx.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s of the close")
	}
	p := h.payload
	if !h.sigOK || h.id == "" || h.id != p.ID || h.attempt != 1 || h.timestamp == "" {
		t.Errorf("request: sigOK %v id %q payload id %q attempt %d timestamp %q", h.sigOK, h.id, p.ID, h.attempt, h.timestamp)
	}
	if p.Type != "periodClosed" || p.Board != "cup" || p.Window != "DAILY" || p.Period != "2031-05-20" || p.Size != 4 ||
		!p.EndedAt.Equal(time.Date(2031, 5, 21, 0, 0, 0, 0, time.UTC)) || !p.RecordedAt.Equal(clock.Now()) || len(p.Top) != 2 {
		t.Fatalf("payload %s", h.body)
	}
	for i, e := range p.Top {
		m := model[i]
		wantName, named := names[m.id]
		tie := int64(1) // competition rank: one more than the players with a strictly better score
		for _, o := range model {
			if o.score > m.score {
				tie++
			}
		}
		if e.Rank != int64(i+1) || e.TieRank != tie || e.TopPercent != 100*float64(i+1)/float64(len(model)) ||
			e.PlayerID != m.id || e.Score != m.score || e.Approximate ||
			!e.UpdatedAt.Equal(day) || (e.DisplayName != nil) != named || named && *e.DisplayName != wantName ||
			string(e.Metadata) != "null" {
			t.Errorf("top[%d] = %+v, want %s %v", i, e, m.id, m.score)
		}
	}
	if want := `"top":[{"rank":1,"tieRank":1,"playerId":"bob","displayName":null,"score":70,"topPercent":25,"approximate":false,` +
		`"updatedAt":"2031-05-20T10:00:00Z","metadata":null}`; !strings.Contains(string(h.body), want) {
		t.Errorf("body %s\nlacks %s", h.body, want)
	}

	var sub struct {
		PeriodClosed struct {
			ID, Board, Window, Period string
			Size                      int
			EndedAt                   time.Time
			Top                       []struct {
				PlayerID    string
				DisplayName *string
				Rank        int
				Score       float64
				TopPercent  float64
			}
		}
	}
	conn.NextData(t, ctxT(t, 10*time.Second), "c", &sub)
	pc := sub.PeriodClosed
	if pc.ID != p.ID || pc.Board != "cup" || pc.Window != "DAILY" || pc.Period != "2031-05-20" || pc.Size != 4 ||
		!pc.EndedAt.Equal(p.EndedAt) || len(pc.Top) != 2 || pc.Top[0].PlayerID != "bob" || pc.Top[1].PlayerID != "ann" ||
		pc.Top[1].DisplayName == nil || *pc.Top[1].DisplayName != "Ann" || pc.Top[1].Rank != 2 ||
		pc.Top[1].Score != 50 || pc.Top[1].TopPercent != 50 {
		t.Errorf("subscription got %+v", pc)
	}
	if got := metricValue(t, s, "lb_close_events_recorded_total"); got != "1" {
		t.Errorf("lb_close_events_recorded_total %q", got)
	}
	waitUntil(t, 5*time.Second, "the delivery to be acknowledged", func() bool {
		return pendingCount(t, s.Store, "cup", rx.srv.URL) == 0 && len(rx.requests()) == 1
	})
	select {
	case h := <-rx.arrived:
		t.Fatalf("a second webhook: %s", h.body)
	case <-time.After(time.Second): // 50 polls and close checks
	}
}

// Two server processes on one Redis: every event is delivered exactly once (each process reads its own share of
// new events), on a standalone Redis and on a cluster with boards on every primary.
func TestPeriodCloseTwoServers(t *testing.T) {
	t.Parallel()
	for _, clustered := range []bool{false, true} {
		name := "standalone"
		if clustered {
			name = "cluster"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)}
			rx := newHookReceiver(t, 0, nil)
			cfg := closeTestConfig(t, clock, rx.srv.URL)
			boards := []string{"b0", "b1", "b2", "b3", "b4", "b5"}
			if clustered {
				cfg.RedisURL = ""
				cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
				boards = boardsOnEveryPrimary(t, cfg.KeyPrefix, 2)
			}
			a := startServer(t, cfg)
			b := startServer(t, cfg)
			for i, id := range boards {
				a.create(t, map[string]any{"id": id, "windows": []string{"DAILY", "WEEKLY"}, "graceSeconds": 0})
				for j := range i + 1 {
					b.submit(t, map[string]any{"board": id, "playerId": fmt.Sprintf("p%d", j), "score": j})
				}
			}
			clock.Set(time.Date(2031, 7, 2, 0, 0, 1, 0, time.UTC)) // 2031-07-02 is a Wednesday: days close
			waitUntil(t, 15*time.Second, "one delivery per board", func() bool { return len(rx.delivered()) == len(boards) })
			waitUntil(t, 5*time.Second, "acknowledgements", func() bool {
				for _, id := range boards {
					if pendingCount(t, a.Store, id, rx.srv.URL) != 0 {
						return false
					}
				}
				return true
			})
			time.Sleep(time.Second) // 50 polls of each server: a second delivery would show
			seen := map[string]bool{}
			for _, h := range rx.requests() {
				if !h.sigOK || h.attempt != 1 || h.status != http.StatusOK {
					t.Errorf("request %+v", h)
				}
				if seen[h.id] {
					t.Errorf("event %s delivered twice", h.id)
				}
				seen[h.id] = true
				i := slices.Index(boards, h.payload.Board)
				if i < 0 || h.payload.Period != "2031-07-01" || h.payload.Size != int64(i+1) ||
					len(h.payload.Top) != i+1 || h.payload.Top[0].PlayerID != fmt.Sprintf("p%d", i) {
					t.Errorf("payload %s", h.body)
				}
			}
			if len(seen) != len(boards) {
				t.Errorf("%d events delivered, want %d", len(seen), len(boards))
			}
		})
	}
}

// boardsOnEveryPrimary returns n board ids per primary of the shared cluster (by the slot of their hash tag).
func boardsOnEveryPrimary(t *testing.T, prefix string, n int) []string {
	c := redistest.SharedCluster(t)
	per := map[string]int{}
	var out []string
	for i := 0; len(out) < n*len(c.Addrs); i++ {
		id := fmt.Sprintf("board-%d", i)
		slot := leaderboard.HashSlot(leaderboard.KeyBase(prefix, id))
		owner, err := c.SlotOwner(context.Background(), slot)
		if err != nil {
			t.Fatal(err)
		}
		if per[owner] < n {
			per[owner]++
			out = append(out, id)
		}
	}
	return out
}

// A receiver that fails three times and then recovers gets the event again after back-offs of at least 40, 80
// and 160 ms (WEBHOOK_RETRY_MIN doubling), with the same idempotency id and body each time and the attempt
// number counting up; it is delivered once the receiver answers 2xx, and then no more.
func TestWebhookRetriesUntilReceiverRecovers(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 8, 10, 9, 0, 0, 0, time.UTC)}
	rx := newHookReceiver(t, 3, nil)
	s := startServer(t, closeTestConfig(t, clock, rx.srv.URL))
	s.create(t, map[string]any{"id": "r", "windows": []string{"DAILY"}, "graceSeconds": 0})
	s.submit(t, map[string]any{"board": "r", "playerId": "x", "score": 1})
	clock.Set(time.Date(2031, 8, 11, 0, 0, 0, 0, time.UTC))
	waitUntil(t, 10*time.Second, "four attempts", func() bool { return len(rx.requests()) >= 4 })
	waitUntil(t, 5*time.Second, "the acknowledgement", func() bool { return pendingCount(t, s.Store, "r", rx.srv.URL) == 0 })
	time.Sleep(time.Second)
	reqs := rx.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, h := range reqs {
		wantStatus := http.StatusInternalServerError
		if i == 3 {
			wantStatus = http.StatusOK
		}
		if !h.sigOK || h.id != reqs[0].id || string(h.body) != string(reqs[0].body) || h.attempt != i+1 || h.status != wantStatus {
			t.Errorf("attempt %d: id %q attempt %d status %d sigOK %v", i+1, h.id, h.attempt, h.status, h.sigOK)
		}
		if i > 0 {
			if gap, min := h.at.Sub(reqs[i-1].at), 40*time.Millisecond<<(i-1); gap < min {
				t.Errorf("attempt %d came %v after the previous one, want at least %v", i+1, gap, min)
			}
		}
	}
}

// A process that dies with a delivery in flight (its context ends after the receiver got the request, before
// any answer): the event stays pending, and another process takes it over once it has been idle for
// WEBHOOK_CLAIM_IDLE and delivers it with the same idempotency id.
func TestWebhookTakenOverWhenProcessDies(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 9, 3, 9, 0, 0, 0, time.UTC)}
	hold := make(chan struct{})
	defer close(hold)
	rx := newHookReceiver(t, 0, hold)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.Closes.Timeout = 500 * time.Millisecond
	cfg.Closes.ClaimIdle = time.Second
	a := startServer(t, cfg)
	a.create(t, map[string]any{"id": "d", "windows": []string{"DAILY"}, "graceSeconds": 0})
	a.submit(t, map[string]any{"board": "d", "playerId": "x", "score": 3})
	clock.Set(time.Date(2031, 9, 4, 0, 0, 0, 0, time.UTC))
	var first hookRequest
	select {
	case first = <-rx.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	a.Shutdown(t) // a dies mid-delivery
	died := time.Now()
	b := startServer(t, cfg)
	var second hookRequest
	select {
	case second = <-rx.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the event was not taken over")
	}
	// Redis counts the idle time from the read (XREADGROUP), a little before the receiver got the first request:
	// the takeover may come that little less than WEBHOOK_CLAIM_IDLE after the first request (980 ms was seen).
	if took := time.Since(died); took > 5*time.Second || second.at.Sub(first.at) < cfg.Closes.ClaimIdle-200*time.Millisecond {
		t.Errorf("taken over %v after the death, %v after the first attempt (WEBHOOK_CLAIM_IDLE %v)", took,
			second.at.Sub(first.at), cfg.Closes.ClaimIdle)
	}
	if second.id != first.id || string(second.body) != string(first.body) || second.attempt != 2 || !second.sigOK {
		t.Errorf("first %q attempt %d, second %q attempt %d", first.id, first.attempt, second.id, second.attempt)
	}
	waitUntil(t, 5*time.Second, "the acknowledgement", func() bool { return pendingCount(t, b.Store, "d", rx.srv.URL) == 0 })
	if got := rx.delivered(); got[first.id] != 1 {
		t.Errorf("delivered %v", got)
	}
	if reqs := rx.requests(); len(reqs) != 2 || reqs[0].status != 0 {
		t.Errorf("requests %+v", reqs)
	}
}

// An event no receiver accepts within WEBHOOK_RETRY_FOR of its close (by the server's clock) is given up: it
// moves to the board's dead-letter stream, is no longer pending, and is not tried again.
func TestWebhookGivesUpAfterRetryFor(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 10, 5, 9, 0, 0, 0, time.UTC)}
	rx := newHookReceiver(t, 1<<30, nil)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.Closes.RetryFor = time.Hour
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "g", "windows": []string{"DAILY"}, "graceSeconds": 0})
	s.submit(t, map[string]any{"board": "g", "playerId": "x", "score": 3})
	clock.Set(time.Date(2031, 10, 6, 0, 0, 0, 0, time.UTC))
	waitUntil(t, 10*time.Second, "two failed attempts", func() bool { return len(rx.requests()) >= 2 })
	clock.Set(time.Date(2031, 10, 6, 1, 0, 1, 0, time.UTC)) // an hour and a second after the close was recorded
	group := webhookGroup(rx.srv.URL)
	waitUntil(t, 10*time.Second, "the dead letter", func() bool {
		ids, err := s.Store.DeadLetters(context.Background(), "g", group)
		return err == nil && len(ids) == 1 && pendingCount(t, s.Store, "g", rx.srv.URL) == 0
	})
	n := len(rx.requests())
	time.Sleep(time.Second)
	if len(rx.requests()) != n {
		t.Errorf("tried again after giving up: %d requests, then %d", n, len(rx.requests()))
	}
	if got := metricValue(t, s, `lb_webhook_deliveries_total{result="gave_up"}`); got != "1" {
		t.Errorf("gave_up metric %q", got)
	}
}

// metricValue returns the value of one series of /metrics.
func metricValue(t *testing.T, s *testServer, series string) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// With a read key required, periodClosed needs it like every subscription; closeEventTop out of 0..1000 is
// BAD_USER_INPUT; 0 means no top.
func TestPeriodClosedReadKeyAndCloseEventTop(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 11, 1, 9, 0, 0, 0, time.UTC)}
	cfg := closeTestConfig(t, clock)
	cfg.APIKeys += ",read:" + testReadKey
	s := startServer(t, cfg)
	ctx := ctxT(t, 5*time.Second)
	if _, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, nil); wstest.CloseCode(err) != 4403 {
		t.Errorf("without the read key: %v", err)
	}
	s.create(t, map[string]any{"id": "k", "windows": []string{"DAILY"}, "closeEventTop": 0})
	var def struct{ Leaderboard struct{ CloseEventTop int } }
	s.must(t, testReadKey, `{ leaderboard(id: "k") { closeEventTop } }`, nil, &def)
	if def.Leaderboard.CloseEventTop != 0 {
		t.Errorf("closeEventTop %d, want 0", def.Leaderboard.CloseEventTop)
	}
	for _, n := range []int{-1, 1001} {
		s.wantCode(t, testAdminKey, "BAD_USER_INPUT", createMutation,
			map[string]any{"in": map[string]any{"id": "bad", "closeEventTop": n}})
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, map[string]any{"authorization": "Bearer " + testReadKey})
	if err := conn.Subscribe("u", periodClosedSub, map[string]any{"b": "nope"}); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Next(ctx)
	if err != nil || len(m.Errors()) != 1 || m.Errors()[0].Code() != "NOT_FOUND" {
		t.Errorf("unknown board: %+v %v", m, err)
	}
}

// A receiver that does not answer holds up only its own URL: another URL gets the event meanwhile, and the silent
// one's attempt fails after WEBHOOK_TIMEOUT and is tried again.
func TestWebhookSlowReceiver(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 12, 1, 9, 0, 0, 0, time.UTC)}
	hold := make(chan struct{})
	defer close(hold)
	slow := newHookReceiver(t, 0, hold)
	fast := newHookReceiver(t, 0, nil)
	cfg := closeTestConfig(t, clock, slow.srv.URL, fast.srv.URL)
	cfg.Closes.Timeout = 600 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "s", "windows": []string{"DAILY"}, "graceSeconds": 0})
	s.submit(t, map[string]any{"board": "s", "playerId": "x", "score": 3})
	clock.Set(time.Date(2031, 12, 2, 0, 0, 0, 0, time.UTC))
	var held hookRequest
	select {
	case held = <-slow.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no request to the slow receiver")
	}
	select {
	case h := <-fast.arrived:
		if h.id != held.id || !h.sigOK {
			t.Errorf("fast receiver got %q, want %q", h.id, held.id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow receiver held up the other URL")
	}
	var retry hookRequest
	select {
	case retry = <-slow.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no second attempt to the slow receiver")
	}
	// The client's timeout starts before it dials and writes, so the receiver sees the first attempt some time
	// after it (56 ms once on a loaded CI machine), and the retry comes less than the timeout after that arrival.
	// Half the timeout keeps that room; a retry that did not wait for the timeout would come after the backoff
	// alone (40 ms).
	if gap := retry.at.Sub(held.at); retry.id != held.id || retry.attempt != 2 || gap < cfg.Closes.Timeout/2 {
		t.Errorf("retry %q attempt %d %v after the first", retry.id, retry.attempt, gap)
	}
	waitUntil(t, 5*time.Second, "both acknowledged", func() bool {
		return pendingCount(t, s.Store, "s", slow.srv.URL) == 0 && pendingCount(t, s.Store, "s", fast.srv.URL) == 0
	})
	if reqs := slow.requests(); len(reqs) != 2 || reqs[0].status != 0 {
		t.Errorf("slow receiver: %+v", reqs)
	}
}

// The embedded store (`make run`, EVALSHA on miniredis) records a season's close and delivers it to a webhook, as
// Redis does.
func TestSeasonCloseWebhookEmbedded(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 11, 2, 12, 0, 0, 0, time.UTC)}
	rx := newHookReceiver(t, 0, nil)
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	cfg.RedisURL = ""
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "emb-league", "windows": []string{"ALL_TIME", "SEASON"}, "graceSeconds": 60})
	s.must(t, testAdminKey, `mutation($e: Time!) { startSeason(board: "emb-league", id: "s1", endsAt: $e) { changed } }`,
		map[string]any{"e": clock.Now().Add(time.Hour).Format(time.RFC3339)}, nil)
	s.submit(t, map[string]any{"board": "emb-league", "playerId": "ann", "score": 4})
	s.submit(t, map[string]any{"board": "emb-league", "playerId": "bob", "score": 9})
	s.must(t, testAdminKey, `mutation { endSeason(board: "emb-league") { changed } }`, nil, nil)
	clock.Set(clock.Now().Add(2 * time.Minute)) // past the grace, and past the season board's next check
	var h hookRequest
	select {
	case h = <-rx.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook for the season's close")
	}
	p := h.payload
	if !h.sigOK || p.Window != "SEASON" || p.Period != "s1" || p.Size != 2 || len(p.Top) != 2 ||
		p.Top[0].PlayerID != "bob" || p.Top[1].PlayerID != "ann" {
		t.Fatalf("payload %s (signature ok %v)", h.body, h.sigOK)
	}
}

// periodClosed over the event-stream transport (GraphQL over SSE): the close event arrives as a next event with
// the same fields as over a websocket.
func TestPeriodClosedOverSSE(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 12, 9, 15, 0, 0, 0, time.UTC)}
	s := startServer(t, closeTestConfig(t, clock))
	s.create(t, map[string]any{"id": "sse-cup", "windows": []string{"DAILY"}, "graceSeconds": 0, "closeEventTop": 1})
	s.submit(t, map[string]any{"board": "sse-cup", "playerId": "ann", "score": 3, "displayName": "Ann"})
	s.submit(t, map[string]any{"board": "sse-cup", "playerId": "bob", "score": 2})
	ctx := ctxT(t, 20*time.Second)
	resp, events := sseOpen(t, ctx, s, http.MethodPost, "", periodClosedSub, map[string]any{"b": "sse-cup"})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The subscription has started (it sees the events recorded after it started).
	waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 1, 5*time.Second)
	clock.Set(time.Date(2031, 12, 10, 0, 0, 1, 0, time.UTC))
	ev := nextEvent(t, events, 10*time.Second)
	var out struct {
		Data struct {
			PeriodClosed struct {
				Board, Window, Period string
				Size                  int
				Top                   []struct {
					PlayerID    string
					DisplayName *string
					Rank        int
				}
			}
		}
	}
	if ev.event != "next" || json.Unmarshal([]byte(ev.data), &out) != nil {
		t.Fatalf("event %+v", ev)
	}
	pc := out.Data.PeriodClosed
	if pc.Board != "sse-cup" || pc.Window != "DAILY" || pc.Period != "2031-12-09" || pc.Size != 2 || len(pc.Top) != 1 ||
		pc.Top[0].PlayerID != "ann" || pc.Top[0].Rank != 1 || pc.Top[0].DisplayName == nil || *pc.Top[0].DisplayName != "Ann" {
		t.Fatalf("periodClosed %s", ev.data)
	}
}
