// Command lbbench benchmarks the leaderboard service side by side with the raw Redis limit, in one run.
//
// It starts everything it needs itself: a non-persistent redis-server on a free loopback port and, for the
// scenarios that go through the API, the server binary built from this repository (what ships), and for the
// ledger scenario a PostgreSQL (internal/pgserver) and a second server process with DATABASE_URL. Load is bounded
// by count and time, every step ends by itself, and it prints markdown tables of medians over -runs repetitions
// with service/raw ratios taken inside each run. `make bench` runs it with the defaults; BENCHMARKS.md records
// results.
//
// With -baseline REV it also builds the server as it was at git revision REV (git archive into a temporary
// directory, removed right after the build) and runs every load step of submit, bulk and reads on both binaries
// in alternating rounds against the same Redis, each with its own KEY_PREFIX, printing new, base and new/base.
//
//	go run ./cmd/lbbench                                # everything (10-15 minutes on 2 cores)
//	go run ./cmd/lbbench -quick                         # small sizes, a few minutes
//	go run ./cmd/lbbench -scenarios submit,reads -runs 5
//	go run ./cmd/lbbench -baseline c650df0 -scenarios submit,bulk,reads
//	go run ./cmd/lbbench -scenarios ledger -ledger-events 50000   # the ledger on vs off; also starts PostgreSQL
//	go run ./cmd/lbbench -scenarios shards -shard-players 100000  # sharded vs unsharded boards on a 3-primary cluster
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scenario is one benchmark of the issue. They run in the order listed here, whatever the order of -scenarios:
// memory first, because it measures boards that later scenarios reuse at exact sizes.
type scenario struct {
	name   string
	issue  int // number in the benchmark issue
	desc   string
	server bool // goes through the server (the others measure package leaderboard on Redis directly)
	run    func(ctx context.Context, e *env) ([]*table, error)
}

var scenarios = []scenario{
	{"memory", 4, "memory per player with and without exactTop vs a plain sorted set", false, runMemory},
	{"growth", 6, "submit and rank latency as a board grows", false, runGrowth},
	{"submit", 1, "submitScore over HTTP at 8/32/128 clients vs the submit script over a pipelined client", true, runSubmit},
	{"bulk", 2, "submitScores with 100 and 1000 items from 8 and 32 callers vs the script over a pipelined client", true, runBulk},
	{"reads", 3, "top/rank/aroundMe/friends on a big board vs the scripts and plain ZRANGE/ZREVRANK", true, runReads},
	{"fanout", 5, "live topUpdates to N websocket subscribers while M submissions/s touch the top", true, runFanout},
	{"ledger", 7, "the PostgreSQL ledger on vs off: submitScore, submitScores, a board's restore from the ledger, bytes per event", true, runLedger},
	{"shards", 8, "sharded vs unsharded boards on a 3-primary Redis Cluster: writes per primary, Redis time per submission, reads on big boards, a capacity model", true, runShards},
}

// fanoutServerEnv turns the server's heap floor off when the fan-out scenario runs, for the reason printed with it
// (fanoutServerEnvWhy). At the fan-out steps' thousands of subscribers the live heap is far above the floor, which
// then changes nothing.
const (
	fanoutServerEnv    = "GC_HEAP_FLOOR=0"
	fanoutServerEnvWhy = "the fan-out scenario's churn and idle steps measure the heap and RSS each subscriber adds, " +
		"not the up to 64 MiB of garbage the heap floor lets the server hold before them"
)

// options are the command-line settings.
type options struct {
	Scenarios []string      // names or issue numbers; empty: all
	Duration  time.Duration // measured phase of each step
	Runs      int           // repetitions; tables show medians
	Quick     bool          // small sizes for a smoke run
	ServerBin string        // prebuilt server binary; empty: go build the repository's root package
	// Baseline is a git revision: its server build runs every submit, bulk and reads step too, in alternating
	// rounds with the new one. Empty: only the new server.
	Baseline   string
	RawWorkers int    // goroutines of the raw single-submission side (0: defaultRawWorkers)
	Workdir    string // where logs and the binary go; empty: a temporary directory, removed at the end
	// Overrides of the scenario sizes (empty or 0: the defaults of sizes()).
	Clients     []int // submit scenario's client counts
	Subscribers []int // fan-out scenario's subscriber counts
	SubmitRate  int   // fan-out scenario's submissions per second
	// Ledger scenario: events on the board it restores, and writers on other boards meanwhile.
	LedgerEvents  int
	LedgerWriters int
	// LedgerRestoreShare is the ledger server's LEDGER_RESTORE_SHARE; 0: not set (the server's default).
	LedgerRestoreShare float64
	// ShardPlayers: players on each read board of the shards scenario (0: shardPlayersFull, or shardPlayersQuick
	// with Quick).
	ShardPlayers int
	// Profile builds the server with net/http/pprof (through go build -overlay; the repository is not changed)
	// and saves CPU and allocation profiles of the key steps into Workdir.
	Profile bool
	// ServerEnv is added to the environment of every server under test (set by run, not a flag).
	ServerEnv []string
	// SubmitProcess: the fan-out steps submit from a child process instead of goroutines of this one.
	SubmitProcess bool
	// Floor adds the HTTP floor (see floor.go) to every submit and reads step; needs Baseline.
	Floor bool
	Out   io.Writer
}

// runRole runs this binary (or the test binary) as one of the children the tool starts, the floor, the CPU burner
// or the submitter, when the environment names one; it does not return then.
func runRole() {
	if addr := os.Getenv(floorRole); addr != "" {
		fmt.Fprintln(os.Stderr, "lbbench floor:", floorMain(addr))
		os.Exit(1)
	}
	if cores := os.Getenv(burnRole); cores != "" {
		fmt.Fprintln(os.Stderr, "lbbench burner:", burnMain(cores))
		os.Exit(1)
	}
	if os.Getenv(submitterRole) != "" {
		if err := submitterMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "lbbench submitter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func main() {
	runRole()
	var o options
	var list string
	flag.StringVar(&list, "scenarios", "", "comma-separated scenarios by name or number (memory=4, growth=6, submit=1, bulk=2, reads=3, fanout=5, ledger=7, shards=8); empty: all")
	flag.DurationVar(&o.Duration, "duration", 0, "measured time of each load step (default 4s, 1s with -quick)")
	flag.IntVar(&o.Runs, "runs", 0, "repetitions of each step; tables show medians (default 3, 1 with -quick)")
	flag.BoolVar(&o.Quick, "quick", false, "small sizes and short steps: a smoke run (about a minute; a few with -baseline)")
	flag.StringVar(&o.ServerBin, "server-bin", "", "use this leaderboard server binary instead of building the repository's (as \"new\")")
	flag.StringVar(&o.Baseline, "baseline", "", "git revision `REV` to compare with (\"base\"): its server, built from git archive REV in a temporary directory (removed right after the build, also on failure or Ctrl-C), runs every submit/bulk/reads step too, alternating with the new one (new then base in the 1st, 3rd, ... run, base then new in the others), each with its own KEY_PREFIX (lbnew, lbbase) on the same redis-server; tables show new, base and new/base. The fanout scenario runs its one-board and 100-board steps on both servers in turn (churn, idle, rank watchers and cluster on the new one only); memory and growth measure package leaderboard directly and are unchanged")
	flag.IntVar(&o.RawWorkers, "raw-workers", 0, fmt.Sprintf("goroutines of the raw side of the submit steps (Store.Submit over a pipelined client; default %d)", defaultRawWorkers))
	flag.StringVar(&o.Workdir, "workdir", "", "keep logs (redis.log, server.log, server-base.log) and profiles here instead of a temporary directory")
	var clients, subscribers string
	flag.StringVar(&clients, "clients", "", "submit scenario: comma-separated client counts (default 8,32,128; 32,128 with -quick)")
	flag.StringVar(&subscribers, "subscribers", "", "fan-out scenario: comma-separated subscriber counts (default 1000,10000)")
	flag.IntVar(&o.SubmitRate, "submit-rate", 0, "fan-out scenario: submissions per second (default 1000)")
	flag.IntVar(&o.LedgerEvents, "ledger-events", 0, fmt.Sprintf("ledger scenario: events (players) on the board it restores from the ledger (default %d, %d with -quick)", ledgerEventsFull, ledgerEventsQuick))
	flag.Float64Var(&o.LedgerRestoreShare, "ledger-restore-share", 0, "ledger scenario: the ledger server's LEDGER_RESTORE_SHARE, the share of its time a restore spends applying events (default: the server's)")
	flag.IntVar(&o.LedgerWriters, "ledger-writers", 0, fmt.Sprintf("ledger scenario: closed-loop submitScore clients writing to %d other boards before and during the restore (default %d)", ledgerWriterBoards, ledgerWritersDefault))
	flag.IntVar(&o.ShardPlayers, "shard-players", 0, fmt.Sprintf("shards scenario: players on each of its two read boards, sharded and unsharded (default %d, %d with -quick)", shardPlayersFull, shardPlayersQuick))
	flag.BoolVar(&o.SubmitProcess, "submit-process", false, "fan-out steps: submit from a process of their own (this binary re-run), as game servers would, instead of from goroutines that share the load generator's scheduler with the subscribers' readers; response times go through a shared memory file")
	flag.BoolVar(&o.Floor, "floor", false, "with -baseline: add the HTTP floor to the submit and reads steps, a net/http server (this binary re-run) that answers every request with the new server's answer to one request of the step and does nothing else; its throughput is the ceiling of any server on net/http here, and \"of floor\" the share of it reached")
	flag.BoolVar(&o.Profile, "profile", false, "build the server with net/http/pprof (go build -overlay, repository untouched) and save CPU/allocation profiles of key steps into -workdir (and a 2 s execution trace of each fan-out step), and the load generator's own CPU profile of the whole run (lbbench.cpu.pprof)")
	flag.Usage = func() {
		w := flag.CommandLine.Output()
		fmt.Fprintf(w, "Usage: go run ./cmd/lbbench [flags]\n\n"+
			"Benchmarks the leaderboard service (built from this repository) against the raw Redis limit on a\n"+
			"redis-server it starts itself, over 127.0.0.1 only, every step bounded in time and count; prints\n"+
			"markdown tables of medians. Scenarios: memory=4, growth=6, submit=1, bulk=2, reads=3, fanout=5,\n"+
			"ledger=7 (also starts PostgreSQL: initdb into a temporary directory, as user nobody when run as root),\n"+
			"shards=8 (a 3-primary Redis Cluster of its own and a server on it: sharded vs unsharded boards).\n"+
			"The raw side of submit and bulk is the physical limit: leaderboard.Store (the server's own script\n"+
			"and arguments) over go-redis's AutoPipeliner, many calls in flight.\n"+
			"-baseline REV adds a build of revision REV (\"base\") to submit, bulk and reads, and to fanout's\n"+
			"one-board and 100-board steps (its churn, idle, rank-watch and cluster steps run on the new server\n"+
			"only); memory and growth do not use a server; ledger and shards run on the new server's binary only.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.Scenarios = splitList(list)
	var err error
	if o.Clients, err = parseInts(clients); err == nil {
		o.Subscribers, err = parseInts(subscribers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbbench:", err)
		os.Exit(2)
	}
	o.Out = os.Stdout
	if o.Profile && o.Workdir != "" {
		// The load generator shares the cores with the server: its own CPU profile shows what it takes.
		if err := os.MkdirAll(o.Workdir, 0o755); err == nil {
			if f, err := os.Create(filepath.Join(o.Workdir, "lbbench.cpu.pprof")); err == nil {
				if pprof.StartCPUProfile(f) == nil {
					defer pprof.StopCPUProfile()
				}
			}
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "lbbench:", err)
		os.Exit(1)
	}
}

// run executes the selected scenarios and prints their tables to o.Out.
func run(ctx context.Context, o options) error {
	if o.Duration <= 0 {
		o.Duration = 4 * time.Second
		if o.Quick {
			o.Duration = time.Second
		}
	}
	if o.Runs <= 0 {
		o.Runs = 3
		if o.Quick {
			o.Runs = 1
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Profile && o.Workdir == "" {
		return errors.New("-profile needs -workdir: the profiles are saved there")
	}
	if o.Profile && o.ServerBin != "" {
		return errors.New("-profile builds the server with pprof itself: it cannot be combined with -server-bin")
	}
	if strings.HasPrefix(o.Baseline, "-") {
		return fmt.Errorf("-baseline %q: want a git revision", o.Baseline)
	}
	if o.Floor && o.Baseline == "" {
		return errors.New("-floor needs -baseline: the floor is a side of the comparison tables")
	}
	selected, err := selectScenarios(o.Scenarios)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(selected, func(sc scenario) bool { return sc.name == "fanout" }) {
		o.ServerEnv = append(o.ServerEnv, fanoutServerEnv)
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return err
	}
	defer e.close()

	// With -baseline both builds happen before the first scenario, so that a revision that does not build fails
	// the run at once rather than after the scenarios that need no server.
	if o.Baseline != "" && slices.ContainsFunc(selected, func(sc scenario) bool { return sc.server }) {
		if err := e.needServer(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "# lbbench %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(o.Out, "%s; GOMAXPROCS %d; %s; duration %s per step, %d run(s), medians; quick=%v\n\n",
		machine(), runtime.GOMAXPROCS(0), e.redisVersion, o.Duration, o.Runs, o.Quick)
	for _, sv := range e.svcs {
		fmt.Fprintf(o.Out, "- %s server: %s, KEY_PREFIX %s\n", sv.name, sv.desc, sv.prefix)
	}
	if len(o.ServerEnv) > 0 {
		fmt.Fprintf(o.Out, "- servers' environment: %s (%s)\n", strings.Join(o.ServerEnv, " "), fanoutServerEnvWhy)
	}
	if len(e.svcs) > 0 || len(o.ServerEnv) > 0 {
		fmt.Fprintln(o.Out)
	}
	var failed []string
	for _, sc := range selected {
		start := time.Now()
		e.logf("scenario %d (%s): %s", sc.issue, sc.name, sc.desc)
		tables, err := sc.run(ctx, e)
		for _, t := range tables {
			t.print(o.Out)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(o.Out, "**scenario %d (%s) failed:** %v\n\n", sc.issue, sc.name, err)
			failed = append(failed, sc.name)
			continue
		}
		e.logf("scenario %d (%s) done in %s", sc.issue, sc.name, time.Since(start).Round(time.Second))
	}
	e.printTargets(o.Out)
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

func selectScenarios(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return scenarios, nil
	}
	var out []scenario
	for _, sc := range scenarios {
		if slices.Contains(names, sc.name) || slices.Contains(names, fmt.Sprint(sc.issue)) {
			out = append(out, sc)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.name == n || fmt.Sprint(sc.issue) == n }) {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenario selected")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want positive integers, got %q", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// machine describes the host: cores and memory.
func machine() string {
	mem := "memory unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
				mem = fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d cores (runtime.NumCPU), %s, %s, %s/%s", runtime.NumCPU(), mem, runtime.Version(),
		runtime.GOOS, runtime.GOARCH)
}
