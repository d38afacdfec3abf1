package periodclose

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Webhook request headers (README "Period-close events and webhooks").
const (
	HeaderEventID   = "X-Leaderboard-Event-Id"  // the event's idempotency id, the same on every attempt
	HeaderSignature = "X-Leaderboard-Signature" // "t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">": see Signature
	HeaderTimestamp = "X-Leaderboard-Timestamp" // unix seconds when this attempt was sent: the signature's t
	HeaderAttempt   = "X-Leaderboard-Attempt"   // 1 for the first attempt, then 2, 3, ...
)

// pendingScan is how many pending events of one outbox a pass looks at for one that may be claimed.
const pendingScan = 100

// maxReceiverBody is how much of a receiver's answer is read (and discarded).
const maxReceiverBody = 64 << 10

// Payload is the JSON body of a webhook request.
type Payload struct {
	ID         string    `json:"id"`   // the idempotency id (HeaderEventID)
	Type       string    `json:"type"` // "periodClosed"
	Board      string    `json:"board"`
	Window     string    `json:"window"`
	Period     string    `json:"period"`
	Size       int64     `json:"size"`
	EndedAt    time.Time `json:"endedAt"`
	RecordedAt time.Time `json:"recordedAt"`
	Top        []Entry   `json:"top"`
	Version    int       `json:"version"` // the frozen standings' version: 1, then one more per correction
	Reason     *string   `json:"reason"`  // why this version replaced the one before; null for version 1
}

// Entry is one rank of a payload's top.
type Entry struct {
	Rank        int64           `json:"rank"`
	TieRank     int64           `json:"tieRank"`
	PlayerID    string          `json:"playerId"`
	DisplayName *string         `json:"displayName"`
	Score       float64         `json:"score"`
	TopPercent  float64         `json:"topPercent"`
	Approximate bool            `json:"approximate"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	Metadata    json.RawMessage `json:"metadata"`
}

// webhookBody encodes the payload of an event.
func webhookBody(ev *leaderboard.CloseEvent) []byte {
	p := Payload{ID: ev.ID(), Type: "periodClosed", Board: ev.Board, Window: string(ev.Window),
		Period: ev.Period, Size: ev.Size, EndedAt: ev.EndedAt, RecordedAt: ev.RecordedAt,
		Top: make([]Entry, len(ev.Top)), Version: ev.Version, Reason: ev.Reason}
	for i, e := range ev.Top {
		p.Top[i] = Entry{Rank: e.Rank, TieRank: e.TieRank, PlayerID: e.PlayerID, DisplayName: e.DisplayName,
			Score: e.Score, TopPercent: e.TopPercent, Approximate: e.Approximate, UpdatedAt: e.UpdatedAt,
			Metadata: e.Metadata}
		if len(e.Metadata) == 0 {
			p.Top[i].Metadata = json.RawMessage("null")
		}
	}
	body, _ := json.Marshal(p)
	return body
}

// Signature returns the value of HeaderSignature for body sent at t (unix s): "t=<t>,v1=<hex>", the hex being the
// HMAC-SHA256 with WEBHOOK_SECRET of t in decimal, ".", and the body (as Stripe signs). The timestamp is signed
// with the body, so a receiver that rejects old timestamps rejects a replayed request, which it could not re-sign.
func Signature(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	ts := strconv.FormatInt(t, 10)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// webhooks delivers the close events of every board's outbox to the WEBHOOK_URLS: each URL is a consumer group
// of every outbox, so it gets every event at least once, and the processes of a deployment share its events
// (each reads new ones for itself). A failed attempt is tried again after a back-off (WEBHOOK_RETRY_MIN doubling
// up to WEBHOOK_RETRY_MAX) until WEBHOOK_RETRY_FOR after the close, then dead-lettered. Short waits are kept in
// the process (it claims the event again before each attempt, so nobody else takes it); an event waiting longer
// than WEBHOOK_CLAIM_IDLE, or held by a process that died, is claimed by whichever process sees it first once it
// has been idle for max(WEBHOOK_CLAIM_IDLE, its back-off).
type webhooks struct {
	store    *leaderboard.Store
	cfg      Config
	client   *http.Client
	consumer string // this process's name in the consumer groups
	log      *slog.Logger
	metrics  Metrics
	targets  []*webhookTarget
}

// webhookTarget is one URL: its consumer group and its delivery slots.
type webhookTarget struct {
	url   string
	group string          // "wh:" and 16 hex digits of the URL's SHA-256 (a URL may carry a token: not stored)
	slots chan struct{}   // one per delivery in flight (WEBHOOK_CONCURRENCY)
	ready map[string]bool // boards whose outbox exists and has the group; only the target's pass goroutine
}

// Group is the consumer group of the outboxes that delivers to a webhook URL: "wh:" and 16 hex digits of the URL's
// SHA-256 (a URL may carry a token: not stored). The store records deliveries per group (leaderboard
// Config.OutboxGroups, Groups).
func Group(url string) string {
	h := sha256.Sum256([]byte(url))
	return "wh:" + hex.EncodeToString(h[:8])
}

// Groups returns the consumer group of each of urls (Group).
func Groups(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = Group(u)
	}
	return out
}

func newWebhooks(store *leaderboard.Store, cfg Config, log *slog.Logger, m Metrics) *webhooks {
	host, _ := os.Hostname()
	w := &webhooks{store: store, cfg: cfg, log: log, metrics: m,
		consumer: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8]),
		client: &http.Client{Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, u := range cfg.URLs {
		w.targets = append(w.targets, &webhookTarget{url: u, group: Group(u),
			slots: make(chan struct{}, cfg.Concurrency), ready: map[string]bool{}})
	}
	return w
}

// run delivers until ctx ends; deliveries in flight then stop unacknowledged (another process takes them over).
func (w *webhooks) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range w.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(w.cfg.PollInterval)
			defer tick.Stop()
			for {
				w.pass(ctx, t, &wg)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	wg.Wait()
	w.client.CloseIdleConnections()
}

// backoff is the wait after the n-th failed attempt.
func (w *webhooks) backoff(n int64) time.Duration {
	d := w.cfg.RetryMin
	for i := int64(1); i < n && d < w.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, w.cfg.RetryMax)
}

// pass starts deliveries for one URL while it has free slots: first events that waited their back-off or whose
// process died, then new ones.
func (w *webhooks) pass(ctx context.Context, t *webhookTarget, wg *sync.WaitGroup) {
	boards, err := w.store.Boards(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("webhooks: listing boards", "err", err)
		}
		return
	}
	start := func(board string, ev *leaderboard.CloseEvent, attempt int64) {
		t.slots <- struct{}{} // never blocks: the caller checked for a free slot, and only this goroutine takes
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-t.slots }()
			w.deliver(ctx, t, board, ev, attempt)
		}()
	}
	// The boards with an outbox and the group: known ones, and those that got their first event since.
	listed := make(map[string]bool, len(boards))
	var unknown []string
	for _, b := range boards {
		if b.ClosesPeriods() {
			listed[b.ID] = true
			if !t.ready[b.ID] {
				unknown = append(unknown, b.ID)
			}
		}
	}
	for id := range t.ready {
		if !listed[id] {
			delete(t.ready, id) // deleted
		}
	}
	ready, err := w.store.OutboxesReady(ctx, unknown, t.group)
	if err != nil {
		w.warn(ctx, "webhooks: looking for outboxes", "", err)
	}
	for _, id := range ready {
		t.ready[id] = true
	}
	// What each outbox has for this URL, in one pipeline: only outboxes with pending or unread events cost more.
	var have []string
	for _, b := range boards {
		if t.ready[b.ID] {
			have = append(have, b.ID)
		}
	}
	states, err := w.store.OutboxGroupStates(ctx, have, t.group)
	if err != nil {
		w.warn(ctx, "webhooks: reading the outboxes' groups", "", err)
		return
	}
	for _, id := range have {
		if _, ok := states[id]; !ok {
			// The outbox or its group is gone: the board was deleted (and maybe created again between two
			// passes); the next pass creates the group again when the outbox exists.
			delete(t.ready, id)
		}
	}
	for _, b := range boards {
		st, ok := states[b.ID]
		if !ok || st.Pending == 0 && st.Lag == 0 {
			continue
		}
		free := cap(t.slots) - len(t.slots)
		if free == 0 || ctx.Err() != nil {
			return
		}
		if st.Pending > 0 {
			free = w.claim(ctx, t, b.ID, free, start)
		}
		if free == 0 {
			return
		}
		if st.Lag == 0 {
			continue
		}
		evs, err := w.store.OutboxRead(ctx, b.ID, t.group, w.consumer, free)
		if err != nil {
			w.warn(ctx, "webhooks: reading an outbox", b.ID, err)
			continue
		}
		for i := range evs {
			start(b.ID, &evs[i], 1)
		}
	}
}

// claim starts deliveries of pending events of one board that waited out their back-off or whose process died,
// with up to free slots, and returns the slots left.
func (w *webhooks) claim(ctx context.Context, t *webhookTarget, board string, free int,
	start func(string, *leaderboard.CloseEvent, int64)) int {
	pending, err := w.store.OutboxPending(ctx, board, t.group, w.cfg.ClaimIdle, pendingScan)
	if err != nil {
		w.warn(ctx, "webhooks: pending events", board, err)
		return free
	}
	for _, p := range pending {
		if free == 0 {
			break
		}
		idle := max(w.cfg.ClaimIdle, w.backoff(p.Deliveries))
		if p.Idle < idle {
			continue
		}
		ev, err := w.store.OutboxClaim(ctx, board, t.group, w.consumer, p.OutboxID, idle)
		if err != nil {
			w.warn(ctx, "webhooks: claiming an event", board, err)
			continue
		}
		if ev != nil {
			start(board, ev, p.Deliveries+1)
			free--
		}
	}
	return free
}

func (w *webhooks) warn(ctx context.Context, msg, board string, err error) {
	if ctx.Err() == nil {
		w.log.Warn(msg, "board", board, "err", err)
	}
}

// deliver makes attempts for one event that this process holds, starting with attempt number attempt.
func (w *webhooks) deliver(ctx context.Context, t *webhookTarget, board string, ev *leaderboard.CloseEvent, attempt int64) {
	// A version whose delivery to this group completed is acknowledged without sending: one sent again after Redis
	// lost it (leaderboard/resend.go), which every group of the new outbox reads, or one announced again under a
	// new outbox id (its first id never reached the ledger, and Redis then lost the fence that held it). Only a
	// resent event waits for the ledger; one sent once goes out when the ledger cannot answer.
	done, err := w.store.DeliveryDone(ctx, ev, t.group)
	if err != nil && ev.FirstID != "" {
		w.warn(ctx, "webhooks: reading an event's delivery in the ledger", board, err)
		return // pending: tried again once idle
	}
	if err == nil && done {
		if err := w.store.OutboxAck(ctx, board, t.group, ev.OutboxID); err != nil {
			w.warn(ctx, "webhooks: acknowledging an event", board, err)
		}
		return
	}
	body := webhookBody(ev)
	// WEBHOOK_RETRY_FOR counts from when the event was recorded, or sent again: the time Redis had lost it
	// does not count against the receiver.
	since := ev.RecordedAt
	if ev.ResentAt.After(since) {
		since = ev.ResentAt
	}
	for {
		if age := w.store.Now().Sub(since); age > w.cfg.RetryFor {
			if err := w.store.OutboxDeadLetter(ctx, board, t.group, ev.OutboxID, "no 2xx answer within WEBHOOK_RETRY_FOR"); err != nil {
				w.warn(ctx, "webhooks: dead-lettering an event", board, err)
				return
			}
			w.record(ctx, t, board, ev, true)
			w.metrics.Deliveries.WithLabelValues("gave_up").Inc()
			w.log.Error("webhook delivery gave up", "url", redactURL(t.url), "board", board, "event", ev.ID(),
				"attempts", attempt-1, "age", age.Round(time.Second))
			return
		}
		status, err := w.post(ctx, t.url, ev.ID(), body, attempt)
		if ctx.Err() != nil {
			return // shutting down: the event stays pending, and another process takes it over
		}
		if err == nil && status/100 == 2 {
			// The ledger first: the delivery completed even if Redis lost the outbox meanwhile (the ack then
			// fails), and a copy sent again after the restore is acknowledged without sending.
			w.record(ctx, t, board, ev, false)
			if err := w.store.OutboxAck(ctx, board, t.group, ev.OutboxID); err != nil {
				w.warn(ctx, "webhooks: acknowledging an event", board, err) // delivered again later: at least once
				return
			}
			w.metrics.Deliveries.WithLabelValues("delivered").Inc()
			return
		}
		w.metrics.Deliveries.WithLabelValues("failed").Inc()
		wait := w.backoff(attempt)
		w.log.Warn("webhook delivery failed", "url", redactURL(t.url), "board", board, "event", ev.ID(),
			"attempt", attempt, "status", status, "err", err, "retry_in", wait)
		if wait+w.cfg.Timeout >= w.cfg.ClaimIdle {
			return // a long wait: pending in Redis, claimed again (by any process) once it has been idle that long
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// Claim it again: its idle time starts again (nobody takes it over during the attempt) and its delivery
		// count goes up. nil: it was acknowledged or trimmed meanwhile.
		again, err := w.store.OutboxClaim(ctx, board, t.group, w.consumer, ev.OutboxID, 0)
		if err != nil || again == nil {
			if err != nil {
				w.warn(ctx, "webhooks: claiming an event", board, err)
			}
			return
		}
		attempt++
	}
}

// record records in the ledger that the delivery of an event to the target's group completed (delivered, or
// given up), so that it is not sent to that group again when Redis loses it; a failure to record is logged: the
// event may then be sent again if Redis loses it (at least once).
func (w *webhooks) record(ctx context.Context, t *webhookTarget, board string, ev *leaderboard.CloseEvent, gaveUp bool) {
	if err := w.store.RecordDelivery(ctx, ev, t.group, gaveUp); err != nil {
		w.warn(ctx, "webhooks: recording a delivery in the ledger", board, err)
	}
}

// post sends one attempt and returns the response status.
func (w *webhooks) post(ctx context.Context, target, id string, body []byte, attempt int64) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "leaderboard-webhooks")
	req.Header.Set(HeaderEventID, id)
	sent := w.store.Now().Unix()
	req.Header.Set(HeaderSignature, Signature(w.cfg.Secret, sent, body))
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(sent, 10))
	req.Header.Set(HeaderAttempt, strconv.FormatInt(attempt, 10))
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxReceiverBody)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// redactURL drops the query and user info of a URL for logs (they may carry a token).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
