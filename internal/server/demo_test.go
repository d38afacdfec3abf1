package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// `make run`: the demo seeds its world board on the embedded store while the server's own clients use it too
// (the close check lists every board, a pipeline of 16384 commands, here every 250 ms), and nothing is logged
// as a warning or an error meanwhile but the embedded store's own notice: a newcomer's first sight is no error.
// (Seed calls of 500 players back to back kept the store from the others past their 3 s socket timeout:
// "redis pipeline failed commands=16384 ... i/o timeout", "close check: listing boards".)
//
// Without the race detector, which makes the embedded store (its Lua interpreted in Go, in this process) many times
// slower than `make run` ever is: 37 s of the race run's longest package.
func TestDemoSeedsTheEmbeddedStoreQuietly(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	cfg := testConfig(t)
	cfg.RedisURL = ""
	cfg.Demo = true
	cfg.DemoSettings.Players = 1500
	cfg.DemoSettings.Rate = 5 // the seeding is the subject: under -race the simulation at 40/s alone fills the store
	cfg.Closes.CheckInterval = 250 * time.Millisecond
	var logged syncBuffer
	s := startServerLog(t, cfg, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if s.App.embedded == nil {
		t.Fatal("no embedded store")
	}
	deadline := time.Now().Add(3 * time.Minute) // seconds on an idle machine; a loaded one (and -race) is far slower
	for !strings.Contains(logged.String(), "demo: world board seeded") {
		if time.Now().After(deadline) {
			t.Fatalf("the world board was not seeded in 3 minutes; the log:\n%s", logged.String())
		}
		if noisy := warnings(logged.String()); len(noisy) > 0 {
			break // no need to wait for the end
		}
		time.Sleep(50 * time.Millisecond)
	}
	if noisy := warnings(logged.String()); len(noisy) > 0 {
		t.Errorf("warnings or errors while the demo seeded the embedded store:\n%s", strings.Join(noisy, "\n"))
	}
}

// warnings returns the WARN and ERROR lines of a text log but the embedded store's notice.
func warnings(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) &&
			!strings.Contains(l, "NO REDIS CONFIGURED") {
			out = append(out, l)
		}
	}
	return out
}

// README's figures: a command on the embedded store may take 15 s before it counts as failed, on a real Redis 3 s.
func TestEmbeddedStoreCommandTimeout(t *testing.T) {
	t.Parallel()
	for embedded, want := range map[bool]time.Duration{true: 15 * time.Second, false: 3 * time.Second} {
		cfg := testConfig(t)
		if embedded {
			cfg.RedisURL = ""
		}
		s := startServer(t, cfg)
		c, ok := s.App.rdb.(*redis.Client)
		if !ok || c.Options().ReadTimeout != want || c.Options().WriteTimeout != want {
			t.Errorf("embedded %v: the client's timeouts are not %v (%T)", embedded, want, s.App.rdb)
		}
	}
}
