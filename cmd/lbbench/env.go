package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// env is what the scenarios share: the Redis the tool started, a Store on it (the "raw script" path), the server
// process (started on first use), and the targets the scenarios measured.
type env struct {
	o            options
	dir          string
	tempDir      bool
	redis        *child
	redisAddr    string
	redisVersion string
	rdb          *redis.Client
	store        *leaderboard.Store

	serverOnce  sync.Once
	serverErr   error
	server      *child
	serverAddr  string
	hot         *rawHTTP // the load steps\' client
	pprofAddr   string   // the server's pprof listener with -profile
	profileName string   // see profileNext

	loaded  map[string]int // fixture boards and sorted sets: how many players they hold
	targets []target
}

// Sizes of the scenarios, full and -quick.
type sizes struct {
	SubmitClients []int
	BulkSizes     []int
	BulkClients   int
	ReadBoard     int   // players on the board the reads run on
	ReadClients   int   // concurrent clients of the read steps
	MemorySizes   []int // players at which memory is measured
	ExactTop      int   // exactTop of the memory scenario's tail board
	GrowthSizes   []int
	Subscribers   []int // fan-out steps
	SubmitRate    int   // fan-out: submissions per second
	LoadWorkers   int   // goroutines loading fixture boards
}

func (e *env) sizes() sizes {
	s := e.defaultSizes()
	if len(e.o.Clients) > 0 {
		s.SubmitClients = e.o.Clients
	}
	if len(e.o.Subscribers) > 0 {
		s.Subscribers = e.o.Subscribers
	}
	if e.o.SubmitRate > 0 {
		s.SubmitRate = e.o.SubmitRate
	}
	return s
}

func (e *env) defaultSizes() sizes {
	if e.o.Quick {
		return sizes{SubmitClients: []int{8, 32}, BulkSizes: []int{100, 1000}, BulkClients: 4, ReadBoard: 20_000,
			ReadClients: 32, MemorySizes: []int{10_000}, ExactTop: 1000, GrowthSizes: []int{1000, 10_000},
			Subscribers: []int{100}, SubmitRate: 200, LoadWorkers: 4}
	}
	return sizes{SubmitClients: []int{8, 32, 128}, BulkSizes: []int{100, 1000}, BulkClients: 8, ReadBoard: 1_000_000,
		ReadClients: 32, MemorySizes: []int{100_000, 1_000_000}, ExactTop: 1000,
		GrowthSizes: []int{10_000, 100_000, 1_000_000}, Subscribers: []int{1000, 10_000}, SubmitRate: 1000,
		LoadWorkers: 4}
}

func newEnv(ctx context.Context, o options) (*env, error) {
	e := &env{o: o, dir: o.Workdir, loaded: map[string]int{}}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "lbbench-")
		if err != nil {
			return nil, err
		}
		e.dir, e.tempDir = d, true
	} else if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	nofile := raiseFileLimit()
	e.logf("work directory %s; open file limit %d", e.dir, nofile)
	var err error
	e.redis, e.redisAddr, err = startRedis(ctx, e.dir)
	if err != nil {
		e.close()
		return nil, err
	}
	// A pool larger than the most concurrent workers of any step, so raw steps never wait for a connection.
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 512, MinIdleConns: 8,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	info, err := e.rdb.Info(ctx, "server").Result()
	if err != nil {
		e.close()
		return nil, err
	}
	e.redisVersion = "Redis " + infoField(info, "redis_version")
	// The same prefix and publish command as the server's defaults: fixture boards are read through the API, and
	// the raw script path does the same work (publishing included) as the service.
	e.store = leaderboard.New(e.rdb, leaderboard.Config{Prefix: "lb"})
	return e, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

func (e *env) close() {
	e.server.stop()
	if e.rdb != nil {
		e.rdb.Close()
	}
	e.redis.stop()
	if e.tempDir {
		os.RemoveAll(e.dir)
	}
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s lbbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// needServer builds and starts the leaderboard server on first use.
func (e *env) needServer(ctx context.Context) error {
	e.serverOnce.Do(func() {
		bin := e.o.ServerBin
		if bin == "" {
			root, err := moduleDir()
			if err != nil {
				e.serverErr = err
				return
			}
			bin = filepath.Join(e.dir, "lbserver")
			e.logf("building the server (go build -o %s .)", bin)
			var overlay string
			if e.o.Profile {
				if overlay, e.serverErr = profileOverlay(e.dir, root); e.serverErr != nil {
					return
				}
			}
			if err := buildServer(ctx, root, bin, overlay); err != nil {
				e.serverErr = err
				return
			}
		}
		var extra []string
		if e.o.Profile {
			port, err := freePort()
			if err != nil {
				e.serverErr = err
				return
			}
			e.pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
			extra = append(extra, "LBBENCH_PPROF_ADDR="+e.pprofAddr)
		}
		e.server, e.serverAddr, e.serverErr = startServer(ctx, bin, e.dir, e.redisAddr, extra...)
		if e.serverErr == nil {
			e.logf("server pid %d on %s", e.server.pid(), e.serverAddr)
			e.hot = newRawHTTP(e.serverAddr, "/graphql")
		}
	})
	return e.serverErr
}

// serverUsage reads the server's CPU time and memory; zero when it is not running.
func (e *env) serverUsage() procUsage {
	if e.server == nil {
		return procUsage{}
	}
	u, _ := readProcUsage(e.server.pid())
	return u
}

// table is one result table, printed as markdown.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(c)))
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintf(w, "### %s\n\n", t.title)
	line(t.head)
	sep := make([]string, len(width))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintln(w, n)
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
}

// target is one goal of the benchmark issue and what this run measured for it.
type target struct {
	name     string
	goal     string
	measured string
	met      bool
}

func (e *env) check(name, goal, measured string, met bool) {
	e.targets = append(e.targets, target{name, goal, measured, met})
}

func (e *env) printTargets(w io.Writer) {
	if len(e.targets) == 0 {
		return
	}
	t := &table{title: "Targets of the benchmark issue (this run)", head: []string{"target", "goal", "measured", "met"}}
	for _, g := range e.targets {
		met := "yes"
		if !g.met {
			met = "**no**"
		}
		t.add(g.name, g.goal, g.measured, met)
	}
	t.print(w)
}

// step runs one load step (warmup, then the measured phase) and adds the CPU used by the server and by
// redis-server during the measured phase, in cores, and the server's RSS at its end.
func (e *env) step(ctx context.Context, st Step, op Op) Sample {
	if st.Warmup > 0 {
		drive(ctx, Step{Workers: st.Workers, Duration: st.Warmup, MaxOps: 1 << 62}, op)
	}
	st.Warmup = 0
	wait := e.startProfiles(ctx, st.Duration)
	s0, r0, g0, t0 := e.serverUsage(), e.redisUsage(), selfUsage(), time.Now()
	s := drive(ctx, st, op)
	s1, r1, g1, el := e.serverUsage(), e.redisUsage(), selfUsage(), time.Since(t0).Seconds()
	wait()
	s.Extra = map[string]float64{"redis_cpu": (r1.CPU - r0.CPU).Seconds() / el, "gen_cpu": (g1.CPU - g0.CPU).Seconds() / el}
	if e.server != nil {
		s.CPU = (s1.CPU - s0.CPU).Seconds() / el
		s.RSS = s1.RSS
	}
	return s
}

// selfUsage is the load generator's own usage (this process).
func selfUsage() procUsage {
	u, _ := readProcUsage(os.Getpid())
	return u
}

// cpuPerOp formats the CPU time per operation of server, redis-server and the load generator, in µs.
// Without the server (raw steps) only redis-server and the load generator.
func cpuPerOp(s Sample, server bool) string {
	if s.Rate == 0 {
		return "-"
	}
	us := func(cores float64) string { return fmt.Sprintf("%.0f", cores/s.Rate*1e6) }
	out := us(s.Extra["redis_cpu"]) + " / " + us(s.Extra["gen_cpu"])
	if server {
		out = us(s.CPU) + " / " + out
	}
	return out
}

func (e *env) redisUsage() procUsage {
	u, _ := readProcUsage(e.redis.pid())
	return u
}

// stepOf returns the Step for a number of workers with the run's duration: a warmup of a fifth of it (at most a
// second), and a generous count bound so that no step runs away even on a fast machine.
func (e *env) stepOf(workers int) Step {
	return Step{Workers: workers, Duration: e.o.Duration, Warmup: min(e.o.Duration/5, time.Second),
		MaxOps: int64(e.o.Duration.Seconds() * 200_000)}
}

func fmtCores(c float64) string {
	if c == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", c)
}
