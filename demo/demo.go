// Package demo creates a few demo leaderboards and runs a simulator that keeps them moving, so that a newcomer
// who starts the server with -demo sees a live dashboard within seconds.
//
// The simulator submits through leaderboard.Store.SubmitMany, the same code path as the GraphQL mutations, so
// the demo exercises the real scripts, the real change events and the real live fan-out.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Ids of the demo boards.
const (
	ArenaBoard = "demo-arena" // DESC points (SUM of match points), ALL_TIME, DAILY and WEEKLY windows
	LapsBoard  = "demo-laps"  // ASC lap times in seconds (BEST), ALL_TIME and DAILY windows
	WorldBoard = "demo-world" // DESC rating (LATEST), tens of thousands of players, exactTop 1000
)

// Defaults of Config.
const (
	DefaultRate         = 40    // submissions per second over all boards
	DefaultPlayers      = 30000 // players of WorldBoard
	DefaultArenaPlayers = 300
	DefaultDrivers      = 120
	DefaultTick         = 100 * time.Millisecond
	DefaultExactTop     = 1000
	DefaultBoardCheck   = 10 * time.Second
	// seedBatch is how many WorldBoard players get their first rating in one call while the board fills up: the
	// simulation runs from the first tick and the big board grows over a few seconds. Between two seed calls
	// the store gets at least as long as the last one took for everything else (see Run): the embedded store
	// runs one command at a time, and back-to-back seed calls of 500 kept its other clients (the close check's
	// board listing, a pipeline of 16384 commands) waiting past their 3 s socket timeout.
	seedBatch = 100
)

// Config configures Run. Every field has a usable zero value.
type Config struct {
	// Rate is how many scores the simulator submits per second, over all demo boards (about half go to
	// ArenaBoard, a third to WorldBoard, the rest to LapsBoard). Default DefaultRate (40).
	Rate float64
	// Players is how many simulated players WorldBoard has; all of them get a rating when Run starts, unless
	// the board already holds at least half of them (a restart against a persistent Redis). Default
	// DefaultPlayers (30000).
	Players int
	// ArenaPlayers is how many players compete on ArenaBoard. Default DefaultArenaPlayers (300).
	ArenaPlayers int
	// Drivers is how many drivers set lap times on LapsBoard. Default DefaultDrivers (120).
	Drivers int
	// ExactTop is WorldBoard's exact tier. It keeps the board's sorted set small, which the embedded store
	// needs: it sorts a whole sorted set on every rank read. Default DefaultExactTop (1000).
	ExactTop int
	// Tick is how often the simulator sends a batch (one SubmitMany call). Default DefaultTick (100 ms).
	Tick time.Duration
	// BoardCheck is how often the simulator makes sure its boards still exist: a Redis without persistence
	// that restarts loses them, and the demo should heal by itself. Default DefaultBoardCheck (10 s).
	BoardCheck time.Duration
	// Seed seeds the simulator's random numbers, so a run can be repeated. 0: a random seed.
	Seed uint64
	// Logger receives a line when the boards are ready and when submissions fail. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Players <= 0 {
		c.Players = DefaultPlayers
	}
	if c.ArenaPlayers <= 0 {
		c.ArenaPlayers = DefaultArenaPlayers
	}
	if c.Drivers <= 0 {
		c.Drivers = DefaultDrivers
	}
	if c.ExactTop <= 0 {
		c.ExactTop = DefaultExactTop
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.BoardCheck <= 0 {
		c.BoardCheck = DefaultBoardCheck
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Boards returns the definitions of the demo boards for cfg (defaults filled in).
func Boards(cfg Config) []leaderboard.Board {
	cfg.fill()
	return []leaderboard.Board{
		{ID: ArenaBoard, Title: "Arena — season points", Order: leaderboard.Desc, Mode: leaderboard.Sum,
			Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Daily, leaderboard.Weekly}},
		{ID: LapsBoard, Title: "Spa-Francorchamps — best lap (s)", Order: leaderboard.Asc, Mode: leaderboard.Best,
			Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Daily}},
		{ID: WorldBoard, Title: "World ranking — rating", Order: leaderboard.Desc, Mode: leaderboard.Latest,
			Windows: []leaderboard.Window{leaderboard.AllTime}, ExactTop: cfg.ExactTop},
	}
}

// Run creates the demo boards (an existing board with the same definition is reused) and submits simulated
// scores at cfg.Rate until ctx is done; meanwhile WorldBoard receives its cfg.Players players, seedBatch per
// call, in at most half of the store's time (it logs "demo: world board seeded" when they are all there). It returns nil when ctx ends, or an
// error when the boards cannot be created. Failed submissions (Redis away for a moment) are logged and the
// simulator carries on, backing off for a second.
func Run(ctx context.Context, store *leaderboard.Store, cfg Config) error {
	cfg.fill()
	if err := createBoards(ctx, store, cfg); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	sim := newSimulator(cfg)
	if size, err := store.Size(ctx, leaderboard.View{Board: WorldBoard}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("demo: size of %s: %w", WorldBoard, err)
	} else if size >= int64(cfg.Players/2) {
		sim.seeded = cfg.Players // a restart against a persistent Redis: the players are there
	}
	cfg.Logger.Info("demo mode: boards ready, simulator running",
		"boards", []string{ArenaBoard, LapsBoard, WorldBoard}, "rate_per_s", cfg.Rate, "players", cfg.Players,
		"seed", cfg.Seed)

	started := time.Now()
	ticker := time.NewTicker(cfg.Tick)
	defer ticker.Stop()
	// The number of scores due is computed from the time that passed, not from ticks: a tick that took long
	// (seeding, a slow Redis) does not lower the rate.
	last := time.Now()
	carry := 0.0
	// Creating a board that exists is a no-op, so the check is simply creating them again.
	lastCheck := time.Now()
	// Seeding leaves the store at least half of its time: the next seed call waits as long as the last one took
	// (see seedBatch). It runs on this goroutine, between the simulator's ticks.
	seed := time.NewTimer(0)
	defer seed.Stop()
	if sim.seeded >= cfg.Players {
		seed.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-seed.C:
			start := time.Now()
			if err := sim.submit(ctx, store, sim.seedBatch()); err == nil {
				sim.seeded = min(sim.seeded+seedBatch, cfg.Players)
			} else if ctx.Err() != nil {
				return nil
			}
			if sim.seeded < cfg.Players {
				seed.Reset(time.Since(start))
			} else {
				cfg.Logger.Info("demo: world board seeded", "board", WorldBoard, "players", cfg.Players,
					"took", time.Since(started).Round(time.Millisecond))
			}
			continue
		case <-ticker.C:
		}
		now := time.Now()
		carry += cfg.Rate * min(now.Sub(last), time.Second).Seconds()
		last = now
		n := int(carry)
		carry -= float64(n)
		if n == 0 {
			continue
		}
		n = min(n, leaderboard.MaxBulk)
		if time.Since(lastCheck) >= cfg.BoardCheck {
			if err := createBoards(ctx, store, cfg); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("demo: checking the boards failed", "err", err)
			} else if err == nil {
				lastCheck = time.Now()
			}
		}
		if err := sim.submit(ctx, store, sim.batch(n)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			cfg.Logger.Warn("demo: submit failed; retrying in a second", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// createBoards creates the demo boards; a board that exists with the same definition is left as it is.
func createBoards(ctx context.Context, store *leaderboard.Store, cfg Config) error {
	for _, b := range Boards(cfg) {
		if _, err := store.CreateBoard(ctx, b); err != nil {
			return fmt.Errorf("demo: create board %s: %w", b.ID, err)
		}
	}
	return nil
}

// simulator holds the hidden state of the simulated players. It is used by one goroutine only.
type simulator struct {
	cfg     Config
	rnd     *rand.Rand
	skill   []float64 // WorldBoard: the rating each player tends to
	rating  []int     // WorldBoard: the current rating (LATEST mode, so the simulator keeps it)
	lapBase []float64 // LapsBoard: each driver's typical lap in seconds
	seeded  int       // WorldBoard: players 0..seeded-1 have their first rating
}

func newSimulator(cfg Config) *simulator {
	s := &simulator{cfg: cfg, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	s.skill = make([]float64, cfg.Players)
	s.rating = make([]int, cfg.Players)
	for i := range s.skill {
		// Player 0 is the strongest; skills fall off like a bell curve's upper tail, so the best few are close
		// together and overtake each other.
		q := (float64(i) + 0.5) / float64(cfg.Players)
		s.skill[i] = 1500 + 320*normalQuantile(1-q)
		s.rating[i] = int(math.Round(s.skill[i] + 60*s.rnd.NormFloat64()))
	}
	s.lapBase = make([]float64, cfg.Drivers)
	for i := range s.lapBase {
		s.lapBase[i] = 104 + 6*float64(i)/float64(cfg.Drivers) + s.rnd.Float64()
	}
	return s
}

// seedBatch returns the first ratings of the next seedBatch WorldBoard players, strongest first, so the top
// of the board is there from the first tick.
func (s *simulator) seedBatch() []leaderboard.Submission {
	to := min(s.seeded+seedBatch, s.cfg.Players)
	subs := make([]leaderboard.Submission, 0, to-s.seeded)
	for i := s.seeded; i < to; i++ {
		subs = append(subs, s.world(i, false))
	}
	return subs
}

// submit sends subs in one call and returns the first error of the call or of an item.
func (s *simulator) submit(ctx context.Context, store *leaderboard.Store, subs []leaderboard.Submission) error {
	out, err := store.SubmitMany(ctx, subs)
	if err != nil {
		return err
	}
	for _, o := range out {
		if o.Err != nil {
			return o.Err
		}
	}
	return nil
}

// batch returns n simulated submissions spread over the boards.
func (s *simulator) batch(n int) []leaderboard.Submission {
	subs := make([]leaderboard.Submission, 0, n)
	for range n {
		switch x := s.rnd.Float64(); {
		case x < 0.5:
			subs = append(subs, s.arena())
		case x < 0.8:
			subs = append(subs, s.world(s.active(s.cfg.Players), true))
		default:
			subs = append(subs, s.lap())
		}
	}
	return subs
}

// active picks a player index in [0, n), strongly favouring low indices: the strong players play the most,
// which keeps the top of the boards moving.
func (s *simulator) active(n int) int {
	u := s.rnd.Float64()
	return min(int(float64(n)*u*u*u), n-1)
}

// arena returns a match result on ArenaBoard. Every player plays as often as the others; stronger ones (low
// indices) score more per match. Points come in steps of 5, so equal totals (ties) are common.
func (s *simulator) arena() leaderboard.Submission {
	i := s.rnd.IntN(s.cfg.ArenaPlayers)
	skill := 0.65 - 0.35*float64(i)/float64(s.cfg.ArenaPlayers)
	points := 5.0
	for range 5 {
		if s.rnd.Float64() < skill {
			points += 5
		}
	}
	if s.rnd.Float64() < skill/5 {
		points += 50 // a win bonus
	}
	return leaderboard.Submission{Board: ArenaBoard, Player: fmt.Sprintf("arena-%03d", i), Score: points,
		DisplayName: playerName(1, i)}
}

// lap returns a lap time on LapsBoard in seconds with hundredths, so two drivers can set the very same time.
func (s *simulator) lap() leaderboard.Submission {
	i := s.rnd.IntN(s.cfg.Drivers)
	t := s.lapBase[i] + s.rnd.ExpFloat64()*0.8
	return leaderboard.Submission{Board: LapsBoard, Player: fmt.Sprintf("driver-%03d", i),
		Score: math.Round(t*100) / 100, DisplayName: playerName(2, i)}
}

// world returns player i's rating on WorldBoard; with play it first plays a match: a win is likelier the
// further the rating is below the player's skill, so ratings wander around skills.
func (s *simulator) world(i int, play bool) leaderboard.Submission {
	if play {
		pWin := 1 / (1 + math.Pow(10, (float64(s.rating[i])-s.skill[i])/400))
		delta := 8 + s.rnd.IntN(17)
		if s.rnd.Float64() >= pWin {
			delta = -delta
		}
		s.rating[i] += delta
	}
	return leaderboard.Submission{Board: WorldBoard, Player: fmt.Sprintf("p%05d", i),
		Score: float64(s.rating[i]), DisplayName: playerName(3, i)}
}

// normalQuantile approximates the inverse of the standard normal CDF (Acklam's rational approximation; good
// to about 1e-9, far more than a demo needs).
func normalQuantile(p float64) float64 {
	p = min(max(p, 1e-12), 1-1e-12)
	a := [...]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
		1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := [...]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
		6.680131188771972e+01, -1.328068155288572e+01}
	c := [...]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
		-2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := [...]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
		3.754408661907416e+00}
	const low = 0.02425
	switch {
	case p < low:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-low:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	}
	q := p - 0.5
	r := q * q
	return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q /
		(((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
}

// ConfigFromEnv reads a Config from the environment (getenv is os.Getenv in the server): DEMO_RATE (scores per
// second), DEMO_PLAYERS (players of WorldBoard) and DEMO_SEED. Unset or invalid values keep the defaults,
// with an error naming the bad variable so the caller can log it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []error
	if v := getenv("DEMO_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || r > 100_000 || math.IsNaN(r) {
			errs = append(errs, fmt.Errorf("DEMO_RATE=%q: want scores per second, above 0 and at most 100000", v))
		} else {
			cfg.Rate = r
		}
	}
	if v := getenv("DEMO_PLAYERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10_000_000 {
			errs = append(errs, fmt.Errorf("DEMO_PLAYERS=%q: want a player count from 1 to 10000000", v))
		} else {
			cfg.Players = n
		}
	}
	if v := getenv("DEMO_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("DEMO_SEED=%q: want an unsigned integer", v))
		} else {
			cfg.Seed = n
		}
	}
	return cfg, errors.Join(errs...)
}
