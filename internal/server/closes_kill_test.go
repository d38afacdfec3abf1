package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/childproc"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A server process killed (SIGKILL) while its webhook request is in flight: the event stays pending in Redis,
// and another server process takes it over after WEBHOOK_CLAIM_IDLE and delivers it with the same idempotency
// id and body; it is then acknowledged.
func TestWebhookSurvivesKilledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := buildServer(t)
	if bin == "" {
		t.FailNow()
	}
	hold := make(chan struct{})
	defer close(hold)
	rx := newHookReceiver(t, 0, hold)
	clock := &closeClock{t: time.Now()}
	cfg := closeTestConfig(t, clock, rx.srv.URL)
	// The takeover's request must reach the receiver before it times out, also on a loaded machine (where 500 ms
	// once passed before the receiver read it, and the takeover's second attempt came first).
	cfg.Closes.Timeout = 3 * time.Second
	cfg.Closes.ClaimIdle = 4 * time.Second

	logf, err := os.Create(filepath.Join(dir, "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	child := exec.Command(bin)
	child.Env = append(os.Environ(), "LISTEN_ADDR=127.0.0.1:0", "REDIS_URL="+cfg.RedisURL, "KEY_PREFIX="+cfg.KeyPrefix,
		"API_KEYS="+cfg.APIKeys, "WEBHOOK_URLS="+rx.srv.URL, "WEBHOOK_SECRET="+testWebhookSecret,
		"WEBHOOK_POLL_INTERVAL=20ms", "WEBHOOK_TIMEOUT=20s", "WEBHOOK_CLAIM_IDLE=30s", "LOG_LEVEL=warn")
	child.Stdout, child.Stderr = logf, logf
	if err := childproc.Start(child); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	defer func() {
		child.Process.Kill()
		<-exited
	}()

	// The event, recorded through a store of the test's own (the child sees the board within a second).
	st := leaderboard.New(redistest.SharedStandalone(t).Client(t), leaderboard.Config{Prefix: cfg.KeyPrefix})
	ctx := context.Background()
	if _, err := st.CreateBoard(ctx, leaderboard.Board{ID: "k", Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	// Yesterday by the real clock (the child process has no other): a closed day on any date the test runs.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	yesterday := today.AddDate(0, 0, -1).Format("2006-01-02")
	// The child takes the event from the stream at some moment after this, which the test cannot see (its POST
	// may arrive much later on a loaded machine); the claim idle time counts from that moment, so the takeover
	// comes at least WebhookClaimIdle after this.
	recorded := time.Now()
	if _, _, err := st.RecordClose(ctx, "k", leaderboard.Daily, yesterday, today); err != nil {
		t.Fatal(err)
	}
	var first hookRequest
	select {
	case first = <-rx.arrived:
	case <-time.After(30 * time.Second):
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("the child delivered nothing within 30s; its log:\n%s", log)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	killed := time.Now()
	s := startServer(t, cfg)
	var second hookRequest
	select {
	case second = <-rx.arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the event was not taken over")
	}
	if second.id != first.id || string(second.body) != string(first.body) || second.attempt != 2 || !second.sigOK ||
		first.attempt != 1 || !first.sigOK || second.at.Sub(recorded) < cfg.Closes.ClaimIdle {
		t.Errorf("first %q attempt %d, second %q attempt %d, %v apart, %v after the event was recorded (killed %v "+
			"after the first)", first.id, first.attempt, second.id, second.attempt, second.at.Sub(first.at),
			second.at.Sub(recorded), killed.Sub(first.at))
	}
	waitUntil(t, 5*time.Second, "the acknowledgement", func() bool { return pendingCount(t, s.Store, "k", rx.srv.URL) == 0 })
}
