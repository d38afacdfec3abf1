package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Server is one real PostgreSQL server (a postmaster and the processes it forks) listening on 127.0.0.1.
//
// A Server returned by Start belongs to one test: it is shut down and its directory removed when that test's
// cleanup runs. The Server returned by Shared lives until Main returns; tests must not stop, kill or restart it
// (Stop and Kill panic on it, Start fails).
type Server struct {
	// Addr is the server's "127.0.0.1:port" address. It never changes, also not across Stop/Kill/Start.
	Addr string

	port     int
	dir      string   // server directory: data/ and postgres.log
	dataDir  string   // data directory (-D)
	logPath  string   // postgres.log: the server's stdout and stderr
	settings []string // extra -c settings of Start
	owner    testing.TB
	shared   bool

	mu              sync.Mutex
	p               *proc // current postmaster; nil or exited when stopped
	lastOrphanKills int   // processes the last Kill had to SIGKILL (for tests)
}

// args returns the postgres command line: the data directory, then pgtest's settings, then the caller's.
func (s *Server) args() []string {
	args := []string{"-D", s.dataDir}
	for _, kv := range []string{
		"listen_addresses=127.0.0.1",
		"port=" + strconv.Itoa(s.port),
		"unix_socket_directories=", // TCP only: socket paths have a length limit and need a shared directory
		"max_connections=200",
		"shared_buffers=16MB",
		"fsync=on",
		"synchronous_commit=on",
		"log_min_messages=warning",
	} {
		args = append(args, "-c", kv)
	}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	return args
}

var (
	errBind  = errors.New("address already in use")
	errStale = errors.New("the previous server's processes still hold its shared memory or lock file")
)

// launch starts the postmaster once and waits until it accepts connections. The caller holds s.mu.
func (s *Server) launch(deadline time.Time) error {
	off := fileSize(s.logPath)
	p, err := spawn(bin.postgres, s.args(), s.dir, s.logPath)
	if err != nil {
		return err
	}
	s.p = p
	if err := s.waitReady(p, off, deadline); err != nil {
		p.shutdown(syscall.SIGQUIT)
		return err
	}
	return nil
}

// waitReady waits until postmaster p has written "ready" into its postmaster.pid and then answers a
// connection, until p exits or the deadline passes. If p exited because its port was taken or a previous
// server of the data directory was still around (see the log from offset off), the error wraps errBind or
// errStale.
func (s *Server) waitReady(p *proc, off int64, deadline time.Time) error {
	pidFile := filepath.Join(s.dataDir, "postmaster.pid")
	want := strconv.Itoa(p.pid())
	for {
		if p.exited() {
			log := readLogFrom(s.logPath, off)
			switch {
			case strings.Contains(log, "Address already in use"):
				return fmt.Errorf("postgres on %s exited: %w", s.Addr, errBind)
			case strings.Contains(log, "is still in use"), strings.Contains(log, "lock file") && strings.Contains(log, "already exists"):
				return fmt.Errorf("postgres on %s exited: %w", s.Addr, errStale)
			}
			return fmt.Errorf("postgres on %s exited before accepting connections: %v", s.Addr, p.err)
		}
		// Lines of postmaster.pid: PID, data directory, start time, port, socket directory, listen address,
		// shared memory key, status ("starting", "ready", ...).
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) >= 8 && lines[0] == want && strings.TrimSpace(lines[7]) == "ready" {
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				err := ping(ctx, s.URL())
				cancel()
				if err == nil {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("postgres on %s is ready but does not answer: %v", s.Addr, err)
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on %s did not get ready within %v", s.Addr, readyTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping connects to url and closes the connection.
func ping(ctx context.Context, url string) error {
	c, err := pgconn.Connect(ctx, url)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// newServer makes a server directory (a copy of the template cluster) and starts a postgres server in it on a
// free port, retrying on other ports when the chosen one turns out to be taken. name prefixes the directory.
func newServer(name string, settings []string) (*Server, error) {
	dir, err := newServerDir(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(readyTimeout)
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		s := &Server{
			Addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			port:     port,
			dir:      dir,
			dataDir:  filepath.Join(dir, "data"),
			logPath:  filepath.Join(dir, "postgres.log"),
			settings: settings,
		}
		s.mu.Lock()
		err = s.launch(deadline)
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			err = fmt.Errorf("%w\n--- postgres log %s ---\n%s", err, s.logPath, logTail(s.logPath))
			break
		}
	}
	os.RemoveAll(dir)
	if errors.Is(err, errBind) {
		err = fmt.Errorf("postgres: no usable port after %d attempts: %w", maxPortAttempts, err)
	}
	return nil, err
}

// remove shuts a private server down (immediate shutdown: its data is thrown away) and removes its directory.
func (s *Server) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.shutdown(syscall.SIGQUIT)
	}
	os.RemoveAll(s.dir)
}

// URL returns the connection string of the server's "postgres" database, as the superuser "postgres" over
// TCP without TLS: "postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable".
func (s *Server) URL() string { return s.dbURL("postgres") }

func (s *Server) dbURL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: s.Addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
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
		if !s.running() {
			return
		}
		if err := s.admin("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: dropping database %s on %s: %v", name, s.Addr, err)
		}
	})
	return s.dbURL(name)
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

// running reports whether the postmaster runs.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p != nil && !s.p.exited()
}

// Stop shuts the server down cleanly (fast shutdown: open transactions are rolled back, sessions ended, a
// checkpoint written; SIGKILL after 30 s) and waits until all its processes are gone. The data directory and
// the port stay for a later Start. Stopping a stopped server is a no-op. Stop panics on the shared server.
func (s *Server) Stop() {
	if s.shared {
		panic("pgtest: Stop called on the shared server; use pgtest.Start for outage tests")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.shutdown(syscall.SIGINT)
	}
}

// Kill crashes the server: SIGKILL to the postmaster, like kill -9, with no shutdown of any kind. Its backends
// and auxiliary processes exit on their own when they notice the postmaster is gone, within tens of
// milliseconds (those still there after 5 s are sent SIGKILL too); Kill returns once they all are gone, so that
// Start can reuse the data directory and port (postgres refuses to start while a process of the old server
// still holds its shared memory) and recover from the write-ahead log what was committed. Killing a stopped
// server is a no-op. Kill panics on the shared server.
func (s *Server) Kill() {
	if s.shared {
		panic("pgtest: Kill called on the shared server; use pgtest.Start for crash tests")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.lastOrphanKills = s.p.kill()
	}
}

// Start starts a stopped or killed server again on the same address and data directory, so the committed data
// is still there (after a Kill, postgres first replays its write-ahead log), and waits (at most 30 s) until it
// accepts connections. Starting a running server is a no-op. On failure Start reports the error, including the
// server log, to the owning test (so it fails even if the result is ignored) and returns it.
func (s *Server) Start() error {
	if s.shared {
		return errors.New("pgtest: Start called on the shared server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil && !s.p.exited() {
		return nil
	}
	deadline := time.Now().Add(readyTimeout)
	var err error
	for {
		// The port can be briefly taken (e.g. by an outgoing connection), and elsewhere than on Linux a killed
		// server's backends may still be exiting: keep retrying until the deadline.
		err = s.launch(deadline)
		if err == nil || !(errors.Is(err, errBind) || errors.Is(err, errStale)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		err = fmt.Errorf("pgtest: restarting postgres on %s: %w\n--- postgres log %s ---\n%s", s.Addr, err, s.logPath, logTail(s.logPath))
		if s.owner != nil {
			s.owner.Errorf("%v", err)
		}
	}
	return err
}
