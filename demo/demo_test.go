package demo_test

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/demo"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// smallConfig is a quick demo: few players, a high rate, short ticks.
func smallConfig() demo.Config {
	return demo.Config{Rate: 600, Players: 3000, ExactTop: 200, ArenaPlayers: 60, Drivers: 40,
		Tick: 20 * time.Millisecond, BoardCheck: 200 * time.Millisecond, Seed: 7, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// start runs demo.Run in the background; the returned function stops it and returns Run's result.
func start(t *testing.T, store *leaderboard.Store, cfg demo.Config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- demo.Run(ctx, store, cfg) }()
	stopped := false
	var result error
	stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("demo.Run did not return within 5 s of its context ending")
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return stop
}

func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// size returns the size of a ranking; 0 while its board does not exist yet (Run creates it in the background).
func size(ctx context.Context, s *leaderboard.Store, v leaderboard.View) (int64, error) {
	n, err := s.Size(ctx, v)
	if leaderboard.ErrorCode(err) == leaderboard.NotFound {
		return 0, nil
	}
	return n, err
}

func TestRunCreatesAndMovesTheBoards(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.SharedStandalone(t).Client(t)
	spy := newSubmitSpy()
	rdb.AddHook(spy)
	store := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t)})
	cfg := smallConfig()
	stop := start(t, store, cfg)

	// The world board is seeded with every player before the simulator starts.
	eventually(t, 15*time.Second, "world board seeded", func() (bool, error) {
		n, err := size(ctx, store, leaderboard.View{Board: demo.WorldBoard})
		return n == int64(cfg.Players), err
	})
	// Every window of every board fills up.
	for _, b := range demo.Boards(cfg) {
		for _, w := range b.Windows {
			eventually(t, 10*time.Second, b.ID+" "+string(w)+" has players", func() (bool, error) {
				n, err := size(ctx, store, leaderboard.View{Board: b.ID, Window: w})
				return n >= 10, err
			})
		}
	}
	// The stored definitions are the documented ones.
	for _, want := range demo.Boards(cfg) {
		got, err := store.Board(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Order != want.Order || got.Mode != want.Mode || got.ExactTop != want.ExactTop ||
			len(got.Windows) != len(want.Windows) {
			t.Errorf("board %s stored as %+v, want %+v", want.ID, got, want)
		}
	}
	worldTop := func() []leaderboard.Entry {
		p, err := store.Top(ctx, leaderboard.View{Board: demo.WorldBoard}, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return p.Entries
	}
	// The simulator keeps the top of the big board moving.
	before := worldTop()
	eventually(t, 10*time.Second, "world top 10 changes", func() (bool, error) {
		after := worldTop()
		for i := range after {
			if i >= len(before) || after[i].PlayerID != before[i].PlayerID || after[i].Score != before[i].Score {
				return true, nil
			}
		}
		return false, nil
	})
	// Ties: equal scores appear (points in steps of 5, integer ratings, lap times in hundredths).
	eventually(t, 10*time.Second, "equal scores on the arena board", func() (bool, error) {
		p, err := store.Top(ctx, leaderboard.View{Board: demo.ArenaBoard}, 0, 100)
		if err != nil {
			return false, err
		}
		return hasTie(p.Entries), nil
	})
	p, err := store.Top(ctx, leaderboard.View{Board: demo.WorldBoard}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !hasTie(p.Entries) {
		t.Error("no equal ratings among the exact tier of the world board")
	}
	// The exact tier stays at exactTop; players beyond it get estimated ranks.
	if len(p.Entries) > cfg.ExactTop {
		t.Errorf("world board lists %d exact entries, exactTop is %d", len(p.Entries), cfg.ExactTop)
	}
	last, err := store.Rank(ctx, leaderboard.View{Board: demo.WorldBoard}, "p02999")
	if err != nil {
		t.Fatal(err)
	}
	if last == nil || !last.Approximate || last.Rank <= int64(cfg.ExactTop) {
		t.Errorf("weakest world player: got %+v, want an approximate rank beyond %d", last, cfg.ExactTop)
	}
	// Lap times rank ascending: the best lap is the smallest.
	laps, err := store.Top(ctx, leaderboard.View{Board: demo.LapsBoard}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(laps.Entries); i++ {
		if laps.Entries[i].Score < laps.Entries[i-1].Score {
			t.Errorf("lap board not ascending at rank %d: %v after %v", i+1, laps.Entries[i].Score,
				laps.Entries[i-1].Score)
		}
		if laps.Entries[i].DisplayName == nil || *laps.Entries[i].DisplayName == "" {
			t.Errorf("driver %s has no display name", laps.Entries[i].PlayerID)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}

	// The spy saw the first run seed every world player: what it counts is what a reseed would send.
	if seen := spy.reset(); seen.world < cfg.Players || seen.arenaCalls == 0 {
		t.Fatalf("first run: the spy saw %d distinct world players and %d arena submit calls, want all %d players",
			seen.world, seen.arenaCalls, cfg.Players)
	}

	// A restart against the same Redis reuses the boards and does not seed again. Seeding sends every world
	// player, seedBatch (500) per tick, before the tick's regular batch; so once the second run has sent its
	// regular batch (one arena submit call per tick) on many more ticks than seeding needs (cfg.Players / 500),
	// a reseed would have sent most world players, while the simulator alone sends a few per tick.
	n0, _ := size(ctx, store, leaderboard.View{Board: demo.WorldBoard})
	stop = start(t, store, cfg)
	ticks := 3 * cfg.Players / 500
	eventually(t, 10*time.Second, "second run submitting", func() (bool, error) {
		return spy.counts().arenaCalls >= ticks, nil
	})
	if err := stop(); err != nil {
		t.Fatalf("second Run on the same Redis: %v", err)
	}
	if seen := spy.counts(); seen.world >= cfg.Players/2 {
		t.Errorf("the second run sent %d distinct world players in %d ticks: it seeded the world board again",
			seen.world, seen.arenaCalls)
	} else {
		t.Logf("second run: %d distinct world players in %d ticks", seen.world, seen.arenaCalls)
	}
	if n1, _ := size(ctx, store, leaderboard.View{Board: demo.WorldBoard}); n1 != n0 {
		t.Errorf("world board size changed from %d to %d on restart", n0, n1)
	}
}

// submitSpy is a go-redis hook on the test's own Redis client that watches the script calls the demo makes: the
// distinct world-board players (ids "p" and five digits) sent in any script call, and the number of script calls
// that carry arena players (one per simulator tick that has arena scores, which nearly every tick has).
type submitSpy struct {
	mu         sync.Mutex
	world      map[string]bool
	arenaCalls int
}

type spyCounts struct{ world, arenaCalls int }

var (
	worldID = regexp.MustCompile(`^p[0-9]{5}$`)
	arenaID = regexp.MustCompile(`^arena-[0-9]{3}$`)
)

func newSubmitSpy() *submitSpy { return &submitSpy{world: map[string]bool{}} }

func (s *submitSpy) counts() spyCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spyCounts{len(s.world), s.arenaCalls}
}

// reset returns the counts and starts again from zero.
func (s *submitSpy) reset() spyCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := spyCounts{len(s.world), s.arenaCalls}
	s.world, s.arenaCalls = map[string]bool{}, 0
	return c
}

func (s *submitSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *submitSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.see(cmd)
		return next(ctx, cmd)
	}
}

func (s *submitSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.see(cmd)
		}
		return next(ctx, cmds)
	}
}

// see counts a script call (FCALL, or EVALSHA/EVAL where Redis has no functions) by the players it names.
func (s *submitSpy) see(cmd redis.Cmder) {
	switch cmd.Name() {
	case "fcall", "evalsha", "eval":
	default:
		return
	}
	arena := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range cmd.Args() {
		if v, ok := a.(string); ok {
			switch {
			case worldID.MatchString(v):
				s.world[v] = true
			case arenaID.MatchString(v):
				arena = true
			}
		}
	}
	if arena {
		s.arenaCalls++
	}
}

func hasTie(es []leaderboard.Entry) bool {
	for i := 1; i < len(es); i++ {
		if es[i].Score == es[i-1].Score {
			return true
		}
	}
	return false
}

func TestRunRefusesAConflictingBoard(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.SharedStandalone(t).Client(t)
	store := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t)})
	if _, err := store.CreateBoard(ctx, leaderboard.Board{ID: demo.LapsBoard, Order: leaderboard.Desc}); err != nil {
		t.Fatal(err)
	}
	err := demo.Run(ctx, store, smallConfig())
	if err == nil || !strings.Contains(err.Error(), demo.LapsBoard) ||
		leaderboard.ErrorCode(err) != leaderboard.Conflict {
		t.Fatalf("Run with a conflicting %s board: got %v, want a CONFLICT naming the board", demo.LapsBoard, err)
	}
}

func TestRunSurvivesRedisOutage(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := srv.Client(t)
	store := leaderboard.New(rdb, leaderboard.Config{Prefix: redistest.Prefix(t)})
	ctx := context.Background()
	cfg := smallConfig()
	cfg.Players = 500
	stop := start(t, store, cfg)
	eventually(t, 10*time.Second, "arena has players", func() (bool, error) {
		n, err := size(ctx, store, leaderboard.View{Board: demo.ArenaBoard})
		return n > 0, err
	})
	srv.Stop()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted server is empty (no persistence): the simulator must keep running, put its boards back and
	// fill them again.
	eventually(t, 10*time.Second, "boards listed again after the restart", func() (bool, error) {
		bs, err := store.Boards(ctx)
		if leaderboard.ErrorCode(err) == leaderboard.Unavailable {
			return false, nil
		}
		return len(bs) == 3, err
	})
	eventually(t, 10*time.Second, "arena has players again", func() (bool, error) {
		n, err := size(ctx, store, leaderboard.View{Board: demo.ArenaBoard})
		return n > 0, err
	})
	if err := stop(); err != nil {
		t.Fatalf("Run after a Redis restart returned %v, want nil", err)
	}
}

// BenchmarkEmbeddedReadsWhileRunning measures what a dashboard sees on the embedded store (miniredis) while the
// demo runs with its default configuration: the latency of a top-10 read of each board (ns/op), and how long
// the world board takes to receive all its players (seed-s).
func BenchmarkEmbeddedReadsWhileRunning(b *testing.B) {
	mr := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	store := leaderboard.New(rdb, leaderboard.Config{PublishCommand: leaderboard.PublishPlain})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seeded := time.Now()
	done := make(chan error, 1)
	go func() { done <- demo.Run(ctx, store, demo.Config{Seed: 1}) }()
	for {
		n, err := store.Size(ctx, leaderboard.View{Board: demo.WorldBoard})
		if err == nil && n == demo.DefaultPlayers {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	seedTime := time.Since(seeded)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		board := []string{demo.ArenaBoard, demo.LapsBoard, demo.WorldBoard}[i%3]
		if _, err := store.Top(ctx, leaderboard.View{Board: board}, 0, 10); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(seedTime.Seconds(), "seed-s")
	cancel()
	<-done
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"DEMO_RATE": "12.5", "DEMO_PLAYERS": "5000", "DEMO_SEED": "42"}
	cfg, err := demo.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Rate != 12.5 || cfg.Players != 5000 || cfg.Seed != 42 {
		t.Fatalf("got %+v, %v", cfg, err)
	}
	cfg, err = demo.ConfigFromEnv(func(string) string { return "" })
	if err != nil || cfg.Rate != 0 || cfg.Players != 0 || cfg.Seed != 0 {
		t.Fatalf("empty environment: got %+v, %v; want the zero Config (defaults)", cfg, err)
	}
	env = map[string]string{"DEMO_RATE": "NaN", "DEMO_PLAYERS": "-3", "DEMO_SEED": "x"}
	cfg, err = demo.ConfigFromEnv(func(k string) string { return env[k] })
	for _, name := range []string{"DEMO_RATE", "DEMO_PLAYERS", "DEMO_SEED"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("bad %s: error %v does not name it", name, err)
		}
	}
	if cfg.Rate != 0 || cfg.Players != 0 || cfg.Seed != 0 {
		t.Errorf("bad values were kept: %+v", cfg)
	}
}
