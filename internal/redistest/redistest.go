// Package redistest runs real redis-server processes (Redis >= 7.0, no mocks)
// for tests: a private standalone server or 3-node cluster per test
// (Standalone, Cluster), or one standalone server and one cluster shared by
// all tests of a test binary (SharedStandalone, SharedCluster, Targets).
//
// redis-server (and, for clusters, redis-cli) must be on PATH; otherwise the
// test fails with a hint to install Redis. Servers listen on free 127.0.0.1
// ports, keep no data on disk (--save "" --appendonly no) and run with
// --protected-mode no.
//
// Packages that use the shared servers must stop them from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Tests sharing a server keep their keys apart with Prefix.
//
// No redis-server outlives the test binary: on Linux each one gets a
// parent-death signal (SIGKILL), so it dies with the test binary however that
// ends (Ctrl-C, SIGTERM, -timeout panic, SIGKILL); elsewhere Main installs a
// SIGINT/SIGTERM handler that stops them before exiting.
package redistest

import (
	"crypto/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

// NoClusterEnv is the environment variable that, when set to a true value
// ("1", "true"), makes Targets return only the standalone target. Meant for
// quick local runs; CI must not set it.
const NoClusterEnv = "REDISTEST_NO_CLUSTER"

var (
	mainActive atomic.Bool // Main is running m.Run
	mainDone   atomic.Bool // Main has stopped the shared servers

	sharedStandaloneMu  sync.Mutex
	sharedStandalone    *Server
	sharedStandaloneErr error

	sharedClusterMu  sync.Mutex
	sharedCluster    *RedisCluster
	sharedClusterErr error
)

// M is what Main and With run: a *testing.M, or what another test helper's With made of one.
type M interface{ Run() int }

// Main runs the tests of a package (m.Run), then stops all redis-server
// processes started by this package that are still running (the shared ones
// in particular), removes their directories and exits with m.Run's status.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// A package that also needs another helper's servers composes their Mains
// with With, e.g. with PostgreSQL:
//
//	func TestMain(m *testing.M) { pgtest.Main(redistest.With(m)) }
func Main(m M) { os.Exit(With(m).Run()) }

// With returns m with this package's servers around it: its Run runs m.Run,
// then stops what Main stops, and returns m.Run's status without exiting, so
// that another helper's Main (or With) can stop its own servers too.
// Elsewhere than on Linux, a SIGINT or SIGTERM during Run stops this
// package's servers and exits.
func With(m M) M { return withServers{m} }

type withServers struct{ m M }

func (w withServers) Run() int {
	defer childproc.StopOnSignal(stopShared)()
	mainActive.Store(true)
	code := w.m.Run()
	stopShared()
	return code
}

func stopShared() {
	mainDone.Store(true)
	stopAllProcs()
	sharedStandaloneMu.Lock()
	if sharedStandalone != nil {
		os.RemoveAll(sharedStandalone.dir)
	}
	sharedStandaloneMu.Unlock()
	sharedClusterMu.Lock()
	if sharedCluster != nil {
		sharedCluster.stop()
	}
	sharedClusterMu.Unlock()
}

func requireMain(tb testing.TB, fn string) {
	tb.Helper()
	if !mainActive.Load() {
		tb.Fatalf("redistest: %s needs the package's TestMain to call redistest.Main: func TestMain(m *testing.M) { redistest.Main(m) }", fn)
	}
	if mainDone.Load() {
		tb.Fatalf("redistest: %s called after redistest.Main stopped the shared servers", fn)
	}
}

// SharedStandalone returns the test binary's shared standalone redis-server,
// starting it on first use (same flags and 10 s readiness timeout as
// Standalone). Its lifetime is not tied to tb: it runs until Main returns.
// Tests must not Stop/Start it or FLUSHALL it; use Prefix for keys. If the
// first start fails, every caller fails with that error.
func SharedStandalone(tb testing.TB) *Server {
	tb.Helper()
	requireMain(tb, "SharedStandalone")
	requireBinaries(tb, false)
	sharedStandaloneMu.Lock()
	defer sharedStandaloneMu.Unlock()
	if sharedStandalone == nil && sharedStandaloneErr == nil {
		dir, err := os.MkdirTemp("", "redistest-shared-")
		if err == nil {
			sharedStandalone, err = newServer(dir, "redis", false)
			if err != nil {
				os.RemoveAll(dir)
			} else {
				sharedStandalone.shared = true
			}
		}
		sharedStandaloneErr = err
	}
	if sharedStandaloneErr != nil {
		tb.Fatalf("redistest: starting shared standalone redis-server: %v", sharedStandaloneErr)
	}
	return sharedStandalone
}

// SharedCluster returns the test binary's shared 3-node Redis Cluster,
// starting it on first use (same setup and checks as Cluster). Its lifetime
// is not tied to tb: it runs until Main returns. Tests must not Stop it or
// FLUSHALL it; use Prefix for keys. If the first start fails, every caller
// fails with that error.
func SharedCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	requireMain(tb, "SharedCluster")
	requireBinaries(tb, true)
	sharedClusterMu.Lock()
	defer sharedClusterMu.Unlock()
	if sharedCluster == nil && sharedClusterErr == nil {
		sharedCluster, sharedClusterErr = newCluster()
		if sharedCluster != nil {
			sharedCluster.shared = true
			for _, n := range sharedCluster.nodes {
				n.shared = true
			}
		}
	}
	if sharedClusterErr != nil {
		tb.Fatalf("redistest: starting shared redis cluster: %v", sharedClusterErr)
	}
	return sharedCluster
}

// Target is one Redis deployment a test suite should run against.
type Target struct {
	// Name is "standalone" or "cluster"; use it as the t.Run name.
	Name string
	// Client is a new client for the target, closed in the cleanup of the
	// tb passed to Targets.
	Client redis.UniversalClient
	// Cluster reports whether Client is a *redis.ClusterClient talking to
	// a Redis Cluster (so multi-key commands need a common hash tag).
	Cluster bool
}

// Targets returns the shared standalone server (a server of its own for a
// test that called WithoutRace) and the shared cluster (in that order) with a
// fresh client each, for running one suite against both:
//
//	for _, tg := range redistest.Targets(t) {
//		t.Run(tg.Name, func(t *testing.T) { ... tg.Client ... })
//	}
//
// With REDISTEST_NO_CLUSTER=1 only the standalone target is returned. Like
// the Shared functions it requires TestMain to call Main.
func Targets(tb testing.TB) []Target {
	tb.Helper()
	standalone := SharedStandalone
	if isVolume(tb) {
		standalone = Standalone // a server of its own (WithoutRace)
	}
	ts := []Target{{Name: "standalone", Client: standalone(tb).Client(tb)}}
	if v, _ := strconv.ParseBool(os.Getenv(NoClusterEnv)); v {
		return ts
	}
	return append(ts, Target{Name: "cluster", Client: SharedCluster(tb).Client(tb), Cluster: true})
}

// maxPrefixLen is the maximum length of a Prefix result, in bytes.
const maxPrefixLen = 40

var (
	prefixSeq  atomic.Uint64
	prefixSalt = rand.Text()[:3] // differs between test binaries / runs
)

// Prefix returns a key prefix unique to this call (every call returns a new
// one), e.g. "tK7Q1b_TestRank-cluster", so tests sharing a server never
// touch each other's keys and may run in parallel. It is "t", a unique id,
// "_" and the tail of the sanitized test name, at most 40 bytes, and
// consists only of [A-Za-z0-9_-]: it never contains '{', '}' or ':', so
// callers choose their own separators and hash tags, e.g.
// "{"+Prefix(t)+"}:board".
func Prefix(tb testing.TB) string {
	id := "t" + prefixSalt + strconv.FormatUint(prefixSeq.Add(1), 36)
	name := sanitize(tb.Name())
	if room := maxPrefixLen - len(id) - 1; len(name) > room {
		name = strings.TrimLeft(name[len(name)-room:], "_-")
	}
	if name == "" {
		return id
	}
	return id + "_" + name
}

// sanitize maps a test name to [A-Za-z0-9_-]: '/' becomes '-', other
// characters become '_', and runs of replacements collapse.
func sanitize(name string) string {
	var b strings.Builder
	var last byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '/':
			c = '-'
		default:
			c = '_'
		}
		if (c == '_' || c == '-') && (last == '_' || last == '-') {
			continue
		}
		b.WriteByte(c)
		last = c
	}
	return b.String()
}
