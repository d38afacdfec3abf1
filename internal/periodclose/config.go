package periodclose

import (
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config is what the server's wiring (internal/server) gives the close checker and the webhook deliveries; the
// server fills every field from its environment variable (LoadConfig), with the default named here. Only
// CheckInterval has a default of its own when zero: the webhook fields are required with URLs (see Check).
type Config struct {
	// CheckInterval is how often the boards are checked for periods that closed (CLOSE_CHECK_INTERVAL).
	// Default 0: 5 s (DefaultCheckInterval), the server's default too.
	CheckInterval time.Duration

	// URLs are the http(s) URLs that get every close event (WEBHOOK_URLS, comma-separated). Default none: no
	// webhooks are delivered.
	URLs []string
	// Secret is the HMAC-SHA256 key of the signature header (WEBHOOK_SECRET; see Signature). No default:
	// required with URLs.
	Secret string
	// Timeout bounds one delivery attempt, the response included (WEBHOOK_TIMEOUT). The server's default is
	// 10 s; must be positive with URLs.
	Timeout time.Duration
	// Concurrency is how many deliveries are in flight per URL in this process (WEBHOOK_CONCURRENCY). The
	// server's default is 4; must be at least 1 with URLs.
	Concurrency int
	// RetryMin is the wait after the first failed attempt, doubling after each one (WEBHOOK_RETRY_MIN). The
	// server's default is 1 s; must be positive with URLs.
	RetryMin time.Duration
	// RetryMax is the longest wait between two attempts (WEBHOOK_RETRY_MAX). The server's default is 10 min;
	// must not be below RetryMin with URLs.
	RetryMax time.Duration
	// RetryFor is how long after its close an event is still tried; then it is dead-lettered
	// (WEBHOOK_RETRY_FOR). The server's default is 24 h.
	RetryFor time.Duration
	// ClaimIdle is how long an event that a process holds unacknowledged waits before another process takes it
	// over (WEBHOOK_CLAIM_IDLE). The server's default is 1 min; must be longer than Timeout with URLs.
	ClaimIdle time.Duration
	// PollInterval is how often the outboxes are read for events to deliver (WEBHOOK_POLL_INTERVAL); the server
	// also feeds its periodClosed subscriptions at this pace. The server's default is 1 s; must be positive
	// with URLs.
	PollInterval time.Duration
}

// DefaultCheckInterval is Config.CheckInterval's default.
const DefaultCheckInterval = 5 * time.Second

// Check returns what is wrong with the webhook settings, each naming its environment variable (nothing when
// URLs is empty).
func (c Config) Check() []string {
	var errs []string
	for _, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Sprintf("WEBHOOK_URLS: %q is not an http or https URL", u))
		}
	}
	if len(c.URLs) == 0 {
		return errs
	}
	if c.Secret == "" {
		errs = append(errs, "WEBHOOK_SECRET is required with WEBHOOK_URLS")
	}
	if c.PollInterval <= 0 || c.RetryMin <= 0 || c.Timeout <= 0 {
		errs = append(errs, "WEBHOOK_POLL_INTERVAL, WEBHOOK_RETRY_MIN and WEBHOOK_TIMEOUT must be positive")
	}
	if c.Concurrency < 1 {
		errs = append(errs, "WEBHOOK_CONCURRENCY must be at least 1")
	}
	if c.ClaimIdle <= c.Timeout {
		errs = append(errs, "WEBHOOK_CLAIM_IDLE must be longer than WEBHOOK_TIMEOUT")
	}
	if c.RetryMax < c.RetryMin {
		errs = append(errs, "WEBHOOK_RETRY_MAX must not be below WEBHOOK_RETRY_MIN")
	}
	return errs
}

// Metrics are the collectors the close checker and the webhook deliveries count in, from the server's registry.
// A nil field is not counted.
type Metrics struct {
	Recorded prometheus.Counter // close events this process recorded in an outbox (lb_close_events_recorded_total)
	// Deliveries counts webhook delivery outcomes by result: "delivered" (2xx), "failed" (one attempt that
	// failed), "gave_up" (dead-lettered after RetryFor) (lb_webhook_deliveries_total{result}).
	Deliveries *prometheus.CounterVec
}

// withDefaults returns m with every nil field set to a collector that no registry serves.
func (m Metrics) withDefaults() Metrics {
	if m.Recorded == nil {
		m.Recorded = prometheus.NewCounter(prometheus.CounterOpts{Name: "uncounted"})
	}
	if m.Deliveries == nil {
		m.Deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uncounted"}, []string{"result"})
	}
	return m
}
