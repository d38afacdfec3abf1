// Package pgtest runs real PostgreSQL servers (PostgreSQL >= 13, no mocks; Unix only) for tests: one server
// shared by all tests of a test binary (Shared), in which each test makes its own empty database
// (Server.Database), or a private server per test (Start) that the test may stop, kill -9 and start again on the
// same data.
//
// initdb and postgres are looked up on PATH, else in `pg_config --bindir`, else in the newest
// /usr/lib/postgresql/*/bin (Debian's layout); when they are missing the test fails with a hint to install them
// (apt-get install -y postgresql). initdb runs once per test binary, into a template cluster that every server
// copies: a copy of a fresh cluster (about 40 MB, 1,000 files) takes a tenth of the time of an initdb.
//
// Servers listen on free 127.0.0.1 ports (no Unix socket), trust every local connection as the superuser
// "postgres" and keep their data in a directory of their own under os.TempDir(), removed when they are done.
// They run with PostgreSQL's durable defaults, fsync=on and synchronous_commit=on: a commit returns once its
// write-ahead log is on disk, so a committed row survives Server.Kill (kill -9), with the fsyncs, and the group
// commit, of production; Start takes other settings. The cluster uses encoding UTF8, locale C and time zone UTC.
// Server logs (postgres.log; log_min_messages=warning) are shown in failures.
//
// initdb and postgres refuse to run as root: when the test binary runs as root they run as the user "nobody"
// (uid and gid 65534 where there is no such user), which owns their directories. Every directory above
// os.TempDir() must then be searchable by that user (it is for /tmp).
//
// Packages that use pgtest must call Main from TestMain, which stops the servers and removes their directories
// when the tests are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// No server outlives the test binary: on Linux each postmaster gets a parent-death signal (SIGKILL), so it dies
// with the test binary however that ends (Ctrl-C, SIGTERM, -timeout panic, SIGKILL), and its backends exit as
// soon as they notice, within a tenth of a second; elsewhere Main installs a SIGINT/SIGTERM handler that stops
// the servers before exiting. The directories of a test binary that died before Main's cleanup are removed by
// the next one.
package pgtest

import (
	"crypto/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

var (
	mainActive atomic.Bool // Main is running m.Run
	mainDone   atomic.Bool // Main has stopped the servers

	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// M is what Main and With run: a *testing.M, or what another test helper's With made of one.
type M interface{ Run() int }

// Main runs the tests of a package (m.Run), then stops every postgres server started by this package that is
// still running (immediate shutdown: the data is thrown away), removes their directories and the template
// cluster, and exits with m.Run's status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// A package that also needs another helper's servers composes their Mains with With, e.g. with Redis:
//
//	func TestMain(m *testing.M) { pgtest.Main(redistest.With(m)) }
func Main(m M) { os.Exit(With(m).Run()) }

// With returns m with this package's servers around it: its Run runs m.Run, then stops and removes what Main
// does, and returns m.Run's status without exiting, so that another helper's Main (or With) can stop its own
// servers too. Elsewhere than on Linux, a SIGINT or SIGTERM during Run stops this package's servers and exits.
func With(m M) M { return withServers{m} }

type withServers struct{ m M }

func (w withServers) Run() int {
	if !childproc.DiesWithParent {
		sigc := make(chan os.Signal, 1)
		signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigc)
		go func() {
			sig := <-sigc
			stopAll()
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		}()
	}
	mainActive.Store(true)
	code := w.m.Run()
	stopAll()
	return code
}

func stopAll() {
	mainDone.Store(true)
	stopAllProcs()
	removeBase()
}

func requireMain(tb testing.TB, fn string) {
	tb.Helper()
	if !mainActive.Load() {
		tb.Fatalf("pgtest: %s needs the package's TestMain to call pgtest.Main: func TestMain(m *testing.M) { pgtest.Main(m) }", fn)
	}
	if mainDone.Load() {
		tb.Fatalf("pgtest: %s called after pgtest.Main stopped the servers", fn)
	}
}

// Shared returns the test binary's shared server, starting it on first use (default settings, as Start). Its
// lifetime is not tied to tb: it runs until Main returns. Tests must not Stop, Kill or Start it; each test keeps
// its data apart in a database of its own (Database). If the first start fails, every caller fails with that
// error.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	requireMain(tb, "Shared")
	requireBinaries(tb)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = newServer("shared", nil)
		if shared != nil {
			shared.shared = true
		}
	}
	if sharedErr != nil {
		tb.Fatalf("pgtest: starting the shared postgres server: %v", sharedErr)
	}
	return shared
}

// Start starts a private server for tb from a copy of the template cluster and returns once it accepts
// connections (waiting at most 30 s). settings are extra server settings as "name=value" (e.g. "fsync=off"),
// given to postgres as -c name=value after the defaults, which they override; listen_addresses, port and
// unix_socket_directories are pgtest's. In tb's cleanup the server is shut down (immediate shutdown, SIGKILL
// after 30 s) and its directory removed.
//
// With "fsync=off" a committed row still survives Kill (the commit has written the log to the kernel, which a
// killed process cannot take back; only a crash of the machine could), and the restart after a Kill skips
// crash recovery's fsync of every file: a fraction of a second instead of seconds. Keep the default where
// durability on disk or the cost of commits is what the test is about.
func Start(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	requireMain(tb, "Start")
	requireBinaries(tb)
	var cs []string
	for _, kv := range settings {
		name, value, ok := strings.Cut(kv, "=")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		switch {
		case !ok || name == "":
			tb.Fatalf("pgtest: setting %q is not name=value", kv)
		case name == "listen_addresses" || name == "port" || name == "unix_socket_directories":
			tb.Fatalf("pgtest: setting %q: %s is set by pgtest", kv, name)
		}
		cs = append(cs, name+"="+value)
	}
	s, err := newServer("private", cs)
	if err != nil {
		tb.Fatalf("pgtest: starting a postgres server: %v", err)
	}
	s.owner = tb
	tb.Cleanup(s.remove)
	return s
}

var (
	nameSeq  atomic.Uint64
	nameSalt = strings.ToLower(rand.Text()[:3]) // differs between test binaries and runs
)

// maxNameLen is PostgreSQL's limit on identifiers (NAMEDATALEN-1), in bytes.
const maxNameLen = 63

// dbName returns a database name unique to this call: "t", a unique id, "_" and the tail of the test name in
// [a-z0-9_], at most 63 bytes, e.g. "tk7q1b_testledger_crash".
func dbName(tb testing.TB) string {
	id := "t" + nameSalt + strconv.FormatUint(nameSeq.Add(1), 36)
	name := sanitize(tb.Name())
	if room := maxNameLen - len(id) - 1; len(name) > room {
		name = strings.TrimLeft(name[len(name)-room:], "_")
	}
	if name == "" {
		return id
	}
	return id + "_" + name
}

// sanitize maps a test name to [a-z0-9_]: letters are lowered, anything else becomes '_', and runs of '_'
// collapse.
func sanitize(name string) string {
	var b strings.Builder
	var last byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		default:
			c = '_'
		}
		if c == '_' && last == '_' {
			continue
		}
		b.WriteByte(c)
		last = c
	}
	return b.String()
}
