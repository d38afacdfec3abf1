// Package periodclose records the close events of the boards' periods and delivers them to webhooks (README
// "Period-close events and webhooks"): closes (the close checker, every CLOSE_CHECK_INTERVAL, and Start, which
// runs it and the deliveries), webhook (the deliveries: consumer groups of the outboxes, signatures, retries,
// dead letters), config (Config, Check, Metrics). The server fills its Config and passes its counters; the
// package never imports the server.
package periodclose

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// maxCloseChecksPerPass bounds the boards one pass of the close checker runs the close script for; the others
// wait for the next pass, so that a pass holds Redis for a fraction of a second.
const maxCloseChecksPerPass = 1000

// closeChecker records the close events of every board when its periods close: every CLOSE_CHECK_INTERVAL it
// runs the close script for the boards whose next close is due (and once for every board it has not seen, to
// catch up). Every process runs one; the script records each event once however many do.
type closeChecker struct {
	store   *leaderboard.Store
	every   time.Duration
	log     *slog.Logger
	metrics Metrics
	due     map[string]closeDue // board id -> when its next close check is due; only the run goroutine
}

// closeDue is when a board's next close check is due (store clock; zero: never), for the definition it was
// computed for: a board deleted and created again with other windows is checked afresh.
type closeDue struct {
	def  string // leaderboard.Board.Definition
	next time.Time
}

func (c *closeChecker) run(ctx context.Context) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		c.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass checks the boards that are due, at most maxCloseChecksPerPass of them.
func (c *closeChecker) pass(ctx context.Context) {
	boards, err := c.store.Boards(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("close check: listing boards", "err", err)
		}
		return
	}
	now := c.store.Now()
	seen := make(map[string]bool, len(c.due))
	checks := 0
	for _, b := range boards {
		if !b.ClosesPeriods() {
			continue
		}
		seen[b.ID] = true
		if d, ok := c.due[b.ID]; ok && d.def == b.Definition() && (d.next.IsZero() || now.Before(d.next)) {
			continue
		}
		if checks == maxCloseChecksPerPass || ctx.Err() != nil {
			break
		}
		checks++
		ids, next, err := c.store.RecordDueCloses(ctx, b.ID)
		if err != nil {
			if ctx.Err() == nil && leaderboard.ErrorCode(err) != leaderboard.NotFound {
				c.log.Warn("close check", "board", b.ID, "err", err)
			}
			continue // due again next pass
		}
		c.due[b.ID] = closeDue{def: b.Definition(), next: next}
		for _, id := range ids {
			c.metrics.Recorded.Inc()
			c.log.Info("period close recorded", "board", b.ID, "outbox_id", id)
		}
	}
	for id := range c.due {
		if !seen[id] {
			delete(c.due, id)
		}
	}
}

// Start starts the close checker and, with cfg.URLs, the webhook deliveries on store, until ctx ends; the
// returned channel is closed when both have stopped. cfg must pass Check.
func Start(ctx context.Context, store *leaderboard.Store, cfg Config, log *slog.Logger, m Metrics) <-chan struct{} {
	m = m.withDefaults()
	done := make(chan struct{})
	every := cfg.CheckInterval
	if every <= 0 {
		every = DefaultCheckInterval
	}
	checker := &closeChecker{store: store, every: every, log: log, metrics: m, due: map[string]closeDue{}}
	var hooks *webhooks
	if len(cfg.URLs) > 0 {
		hooks = newWebhooks(store, cfg, log, m)
	}
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); checker.run(ctx) }()
		if hooks != nil {
			wg.Add(1)
			go func() { defer wg.Done(); hooks.run(ctx) }()
		}
		wg.Wait()
	}()
	return done
}
