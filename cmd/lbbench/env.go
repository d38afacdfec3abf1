package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgserver"
	"github.com/leaderboard/leaderboard/internal/redisinfo"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// env is what the scenarios share: the Redis the tool started, a Store on it (the "raw script" path), the
// servers under test (started on first use: the current tree's build, and with -baseline a build of that
// revision), and the targets the scenarios measured.
type env struct {
	o            options
	dir          string
	tempDir      bool
	redis        *child
	redisAddr    string
	redisVersion string
	rdb          *redis.Client
	store        *leaderboard.Store // on rdb: fixtures, the reads' script side, memory, growth
	// rawStore is the raw side of the submit and bulk steps: a Store over a pipelined client (go-redis's
	// AutoPipeliner on rdb), so that many script calls are in flight on few connections; rawLabel says which
	// client it got.
	rawStore *leaderboard.Store
	rawAP    *redis.AutoPipeliner
	rawLabel string

	serverOnce  sync.Once
	serverErr   error
	svcs        []*service // [new] or, with -baseline, [new, base]
	floor       *service   // the HTTP floor with -floor (floor.go), else nil
	pprofAddr   string     // the new server's pprof listener with -profile
	nofile      int        // RLIMIT_NOFILE of this process and of the servers it starts
	profileName string     // see profileNext

	loaded  map[string]int // fixture boards and sorted sets written through store: how many players they hold
	targets []target
}

// service is one server binary under test, running against the tool's Redis with its own KEY_PREFIX.
type service struct {
	name   string // "new" (this tree, or -server-bin) or "base" (-baseline REV)
	desc   string // what was built, for the report
	prefix string // its KEY_PREFIX
	bin    string
	proc   *child
	addr   string
	hot    *rawHTTP // the load steps' client
	// viaAPI: its fixtures are written through its own API (submitScores), because its Redis key format may
	// differ from this tree's Store; otherwise through env.store (this tree's code, the new server's format).
	viaAPI bool
	loaded map[string]int // viaAPI fixture boards: how many players they hold
}

// Key prefixes of the servers under test. Without -baseline the new server keeps the default ("lb") as before.
const (
	prefixDefault = "lb"
	prefixNew     = "lbnew"
	prefixBase    = "lbbase"
)

// newSvc is the server built from this tree (or -server-bin); nil before needServer.
func (e *env) newSvc() *service {
	if len(e.svcs) == 0 {
		return nil
	}
	return e.svcs[0]
}

// roundOrder returns the indexes of e.svcs in the order run r measures them: new first in even runs, the
// baseline first in odd ones, so that neither side always runs right after the raw sides or the floor (the same
// pair of binaries measured in the two orders differed by up to 8 % here).
func (e *env) roundOrder(r int) []int {
	order := make([]int, len(e.svcs))
	for i := range order {
		order[i] = i
		if r%2 == 1 {
			order[i] = len(order) - 1 - i
		}
	}
	return order
}

// sideLabels names the servers of e.svcs as the tables do: "new", and "base" with -baseline.
func (e *env) sideLabels() []string {
	return []string{"new", "base"}[:len(e.svcs)]
}

// baseline reports whether a -baseline server runs next to the new one.
func (e *env) baseline() bool { return e.o.Baseline != "" }

// prefix is the KEY_PREFIX of the new server and of env.store and env.rawStore.
func (e *env) prefix() string {
	if e.baseline() {
		return prefixNew
	}
	return prefixDefault
}

// Sizes of the scenarios, full and -quick.
type sizes struct {
	SubmitClients []int
	BulkSizes     []int
	BulkClients   []int // concurrent callers of the bulk steps
	ReadBoard     int   // players on the board the reads run on
	ReadClients   int   // concurrent clients of the read steps
	MemorySizes   []int // players at which memory is measured
	ExactTop      int   // exactTop of the memory scenario's tail board
	GrowthSizes   []int
	Subscribers   []int // fan-out steps
	SubmitRate    int   // fan-out: submissions per second
	LoadWorkers   int   // goroutines loading fixture boards
	LedgerEvents  int   // ledger: events on the restored board
	LedgerWriters int   // ledger: clients writing to other boards around the restore
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
	if e.o.LedgerEvents > 0 {
		s.LedgerEvents = e.o.LedgerEvents
	}
	if e.o.LedgerWriters > 0 {
		s.LedgerWriters = e.o.LedgerWriters
	}
	return s
}

func (e *env) defaultSizes() sizes {
	if e.o.Quick {
		return sizes{SubmitClients: []int{32, 128}, BulkSizes: []int{100, 1000}, BulkClients: []int{8, 32},
			ReadBoard: 20_000, ReadClients: 32, MemorySizes: []int{10_000}, ExactTop: 1000, GrowthSizes: []int{1000, 10_000},
			Subscribers: []int{100}, SubmitRate: 200, LoadWorkers: 4, LedgerEvents: ledgerEventsQuick,
			LedgerWriters: ledgerWritersDefault}
	}
	return sizes{SubmitClients: []int{8, 32, 128}, BulkSizes: []int{100, 1000}, BulkClients: []int{8, 32},
		ReadBoard: 1_000_000, ReadClients: 32, MemorySizes: []int{100_000, 1_000_000}, ExactTop: 1000,
		GrowthSizes: []int{10_000, 100_000, 1_000_000}, Subscribers: []int{1000, 10_000}, SubmitRate: 1000,
		LoadWorkers: 4, LedgerEvents: ledgerEventsFull, LedgerWriters: ledgerWritersDefault}
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
	e.nofile = int(raiseFileLimit())
	e.logf("work directory %s; open file limit %d", e.dir, e.nofile)
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
	version, ok := redisinfo.Field(info, "redis_version")
	if !ok {
		version = "?"
	}
	e.redisVersion = "Redis " + version
	// The same prefix and publish command as the (new) server's: fixture boards are read through the API, and
	// the raw script path does the same work (publishing included) as the service.
	e.store = leaderboard.New(e.rdb, leaderboard.Config{Prefix: e.prefix()})
	// The raw side of submit and bulk: the same Store on go-redis's AutoPipeliner (blocking face, default
	// options: one ordered stream of pipelined batches), which is a redis.UniversalClient; on the pool itself if
	// the pipeliner cannot be had.
	if ap, err := e.rdb.AutoPipeline(); err == nil {
		e.rawAP = ap
		e.rawStore = leaderboard.New(ap, leaderboard.Config{Prefix: e.prefix()})
		e.rawLabel = "raw: Store over a pipelined client"
	} else {
		e.logf("go-redis AutoPipeline: %v; the raw side uses the 512-connection pool, unpipelined", err)
		e.rawStore = e.store
		e.rawLabel = "raw: Store over a 512-connection pool (not pipelined)"
	}
	return e, nil
}

func (e *env) close() {
	if e.floor != nil {
		e.floor.proc.stop()
		e.floor.hot.closeAll()
	}
	for _, sv := range e.svcs {
		sv.proc.stop()
		if sv.hot != nil {
			sv.hot.closeAll()
		}
	}
	if e.rawAP != nil {
		e.rawAP.Close()
	}
	if e.rdb != nil {
		e.rdb.Close()
	}
	e.redis.stop()
	pgserver.StopAll() // the ledger scenario's PostgreSQL, if it is still there, and its directories
	if e.tempDir {
		os.RemoveAll(e.dir)
	}
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s lbbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// needServer builds and starts the servers under test on first use: the new one (this repository's root
// package, or -server-bin) and, with -baseline, the baseline revision's build.
func (e *env) needServer(ctx context.Context) error {
	e.serverOnce.Do(func() { e.serverErr = e.startServers(ctx) })
	return e.serverErr
}

func (e *env) startServers(ctx context.Context) error {
	nw := &service{name: "new", desc: "-server-bin " + e.o.ServerBin, prefix: e.prefix(), bin: e.o.ServerBin,
		loaded: map[string]int{}}
	var root string
	if nw.bin == "" || e.baseline() {
		var err error
		if root, err = moduleDir(); err != nil {
			return err
		}
	}
	// The baseline first: a revision that does not exist or does not build fails the run before anything else.
	var base *service
	if e.baseline() {
		base = &service{name: "base", prefix: prefixBase, bin: filepath.Join(e.dir, "lbserver-base"), viaAPI: true,
			loaded: map[string]int{}}
		e.logf("building the baseline server at %s (git archive into a temporary directory, go build -trimpath)",
			e.o.Baseline)
		start := time.Now()
		commit, err := buildRevision(ctx, root, e.o.Baseline, e.dir, base.bin)
		if err != nil {
			return fmt.Errorf("-baseline %s: %w", e.o.Baseline, err)
		}
		base.desc = fmt.Sprintf("%s (%s)", e.o.Baseline, commit[:12])
		e.logf("baseline %s built in %s", base.desc, time.Since(start).Round(100*time.Millisecond))
	}
	if nw.bin == "" {
		nw.bin = filepath.Join(e.dir, "lbserver")
		nw.desc = "this tree at " + treeDesc(ctx, root)
		e.logf("building the server (go build -trimpath -o %s .)", nw.bin)
		var overlay string
		if e.o.Profile {
			var err error
			if overlay, err = profileOverlay(e.dir, root); err != nil {
				return err
			}
		}
		if err := buildServer(ctx, root, nw.bin, overlay, nil); err != nil {
			return err
		}
	}
	e.svcs = []*service{nw}
	if base != nil {
		e.svcs = append(e.svcs, base)
	}
	for _, sv := range e.svcs {
		extra := append([]string{"KEY_PREFIX=" + sv.prefix}, e.o.ServerEnv...)
		if e.o.Profile && sv == nw {
			port, err := freePort()
			if err != nil {
				return err
			}
			e.pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
			extra = append(extra, "LBBENCH_PPROF_ADDR="+e.pprofAddr)
		}
		logName := "server.log"
		if sv != nw {
			logName = "server-" + sv.name + ".log"
		}
		var err error
		sv.proc, sv.addr, err = startServer(ctx, sv.bin, e.dir, logName, "REDIS_URL=redis://"+e.redisAddr, extra...)
		if err != nil {
			return fmt.Errorf("%s server: %w", sv.name, err)
		}
		sv.hot = newRawHTTP(sv.addr, "/graphql")
		e.logf("%s server (%s, KEY_PREFIX %s): pid %d on %s", sv.name, sv.desc, sv.prefix, sv.proc.pid(), sv.addr)
	}
	if e.o.Floor {
		return e.startFloor(ctx)
	}
	return nil
}

// treeDesc describes the working tree the new server is built from: its HEAD and whether tracked files outside
// this tool differ from it.
func treeDesc(ctx context.Context, root string) string {
	head, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "go build ."
	}
	desc := "HEAD " + strings.TrimSpace(string(head))
	st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--",
		":/", ":(exclude,top)cmd/lbbench").Output()
	if err == nil && len(st) > 0 {
		desc += " + uncommitted changes"
	}
	return desc
}

// serverUsage reads the new server's CPU time and memory; zero when it is not running.
func (e *env) serverUsage() procUsage {
	return e.newSvc().usage()
}

// usage reads the server's CPU time and memory; zero when it is not running (or sv is nil).
func (sv *service) usage() procUsage {
	if sv == nil || sv.proc == nil {
		return procUsage{}
	}
	u, _ := readProcUsage(sv.proc.pid())
	return u
}

// step runs one load step (warmup, then the measured phase) and adds the CPU used by the new server and by
// redis-server during the measured phase, in cores, and the server's RSS at its end.
func (e *env) step(ctx context.Context, st Step, op Op) Sample {
	return e.stepOn(ctx, e.newSvc(), st, op)
}

// stepOn is step measuring the CPU and RSS of sv's server (none when sv is nil: a raw step).
func (e *env) stepOn(ctx context.Context, sv *service, st Step, op Op) Sample {
	if st.Warmup > 0 {
		drive(ctx, Step{Workers: st.Workers, Duration: st.Warmup, MaxOps: 1 << 62}, op)
	}
	st.Warmup = 0
	wait := func() {}
	if sv != nil && sv == e.newSvc() {
		wait = e.startProfiles(ctx, st.Duration) // only the new server is built with pprof
	}
	c0 := e.commandStats(ctx)
	s0, r0, g0, t0 := sv.usage(), e.redisUsage(), selfUsage(), time.Now()
	s := drive(ctx, st, op)
	s1, r1, g1, el := sv.usage(), e.redisUsage(), selfUsage(), time.Since(t0).Seconds()
	c1 := e.commandStats(ctx)
	wait()
	s.Extra = map[string]float64{"redis_cpu": (r1.CPU - r0.CPU).Seconds() / el, "gen_cpu": (g1.CPU - g0.CPU).Seconds() / el}
	addCommandStats(&s, c0, c1, el)
	if sv != nil && sv.proc != nil {
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

// Concurrency of the raw side of the submit and bulk steps: enough calls in flight that Redis never waits for the
// client (measured on 2 cores: single submissions gain up to 256 in flight on the pipelined client; 1000-item
// calls saturate Redis from 8 in flight, and more only lengthen the queue each call waits in).
const (
	defaultRawWorkers = 256 // single submissions (-raw-workers)
	rawBulkWorkers    = 16  // bulk calls
)

// rawWorkers is the number of goroutines of the raw single-submission steps.
func (e *env) rawWorkers() int {
	if e.o.RawWorkers > 0 {
		return e.o.RawWorkers
	}
	return defaultRawWorkers
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
