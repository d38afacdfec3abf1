// Package pgtest runs real PostgreSQL servers (PostgreSQL >= 13, no mocks; Unix only) for tests: one server
// shared by all tests of a test binary (Shared), in which each test makes its own empty database
// (Server.Database), or a private server per test (Start) that the test may stop, kill -9 and start again on the
// same data.
//
// It is a thin testing wrapper over internal/pgserver, which owns the processes: how initdb and postgres are
// found (a test fails with a hint to install them: apt-get install -y postgresql), the template cluster that
// every server copies, the free 127.0.0.1 ports, the durable defaults (fsync=on, synchronous_commit=on: a
// committed row survives Server.Kill), the run user "nobody" when the tests run as root, and the parent-death
// signal that keeps any server from outliving the test binary. Server logs are shown in failures.
//
// Packages that use pgtest must call Main from TestMain, which stops the servers and removes their directories
// when the tests are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Elsewhere than on Linux (no parent-death signal), Main installs a SIGINT/SIGTERM handler that stops the
// servers before exiting. The directories of a test binary that died before Main's cleanup are removed by the
// next one.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaderboard/leaderboard/internal/childproc"
	"github.com/leaderboard/leaderboard/internal/pgserver"
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
	defer childproc.StopOnSignal(stopAll)()
	mainActive.Store(true)
	code := w.m.Run()
	stopAll()
	return code
}

func stopAll() {
	mainDone.Store(true)
	pgserver.StopAll()
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

// requireBinaries fails tb unless initdb and postgres of PostgreSQL >= 13 were found.
func requireBinaries(tb testing.TB) {
	tb.Helper()
	if err := pgserver.CheckBinaries(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// Server is one real PostgreSQL server listening on 127.0.0.1 (a pgserver.Server: Addr, URL, Stop, Kill,
// Start, ...), with a test's databases on it.
//
// A Server returned by Start belongs to one test: it is shut down and its directory removed when that test's
// cleanup runs. The Server returned by Shared lives until Main returns; tests must not stop, kill or restart it
// (Stop and Kill panic on it, Start fails).
type Server struct {
	*pgserver.Server
	owner  testing.TB // the test of a private server
	shared bool
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
		var s *pgserver.Server
		if s, sharedErr = pgserver.New(pgserver.Options{Name: "shared"}); sharedErr == nil {
			shared = &Server{Server: s, shared: true}
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
// unix_socket_directories are pgserver's. In tb's cleanup the server is shut down (immediate shutdown, SIGKILL
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
	if _, err := pgserver.CheckSettings(settings); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	s, err := pgserver.New(pgserver.Options{Name: "private", Settings: settings})
	if err != nil {
		tb.Fatalf("pgtest: starting a postgres server: %v", err)
	}
	tb.Cleanup(s.Remove)
	return &Server{Server: s, owner: tb}
}

// Stop shuts the server down cleanly (see pgserver.Server.Stop). Stop panics on the shared server.
func (s *Server) Stop() {
	if s.shared {
		panic("pgtest: Stop called on the shared server; use pgtest.Start for outage tests")
	}
	s.Server.Stop()
}

// Kill crashes the server, like kill -9 (see pgserver.Server.Kill). Kill panics on the shared server.
func (s *Server) Kill() {
	if s.shared {
		panic("pgtest: Kill called on the shared server; use pgtest.Start for crash tests")
	}
	s.Server.Kill()
}

// Start starts a stopped or killed server again on the same address and data (see pgserver.Server.Start). On
// failure it reports the error, including the server log, to the owning test (so it fails even if the result is
// ignored) and returns it. Start fails on the shared server.
func (s *Server) Start() error {
	if s.shared {
		return errors.New("pgtest: Start called on the shared server")
	}
	err := s.Server.Start()
	if err != nil {
		err = errors.New("pgtest: " + err.Error())
		if s.owner != nil {
			s.owner.Errorf("%v", err)
		}
	}
	return err
}

// adminTimeout bounds a CREATE or DROP DATABASE, connection included.
const adminTimeout = 30 * time.Second

// Database creates a fresh, empty database on s for tb (CREATE DATABASE from template1, named after the test
// and unique, e.g. "tk7q1b_testledger_crash") and returns its URL, like URL's. In tb's cleanup it is dropped
// WITH (FORCE), which ends the connections still open to it; on a private server that is stopped by then,
// nothing is done. Tests that share a server keep apart this way and may run in parallel.
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	name := dbName(tb)
	if err := s.admin("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: creating database %s on %s: %v", name, s.Addr, err)
	}
	tb.Cleanup(func() {
		if !s.Running() {
			return
		}
		if err := s.admin("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: dropping database %s on %s: %v", name, s.Addr, err)
		}
	})
	return s.DatabaseURL(name)
}

// admin runs one statement in the postgres database over a connection of its own.
func (s *Server) admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Pool returns a pgxpool.Pool (pgx's default settings) on a fresh database of s made by Database, closed in
// tb's cleanup before the database is dropped. Pool(tb).Config().ConnString() is the database's URL.
func (s *Server) Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dsn := s.Database(tb)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: pool on %s: %v", dsn, err)
	}
	tb.Cleanup(pool.Close)
	return pool
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
