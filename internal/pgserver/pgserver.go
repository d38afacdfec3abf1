// Package pgserver runs real PostgreSQL servers (PostgreSQL >= 13; Unix only) on free loopback ports: the one
// owner of starting, stopping, crashing and restarting them, for the tests (through internal/pgtest, its thin
// testing wrapper) and for the benchmark tool (cmd/lbbench).
//
// initdb and postgres are looked up on PATH, else in `pg_config --bindir`, else in the newest
// /usr/lib/postgresql/*/bin (Debian's layout); CheckBinaries says how to install them when they are missing
// (apt-get install -y postgresql). initdb runs once per process, into a template cluster that every server
// copies: copying a fresh cluster is far quicker than an initdb.
//
// Servers listen on free 127.0.0.1 ports (no Unix socket), trust every local connection as the superuser
// "postgres" and keep their data in a directory of their own under os.TempDir(), removed by Remove. They run
// with PostgreSQL's durable defaults, fsync=on and synchronous_commit=on: a commit returns once its write-ahead
// log is on disk, so a committed row survives Kill (kill -9), with the fsyncs, and the group commit, of
// production; New takes other settings. The cluster uses encoding UTF8, locale C and time zone UTC.
//
// initdb and postgres refuse to run as root: when this process runs as root they run as the user "nobody" (uid
// and gid 65534 where there is no such user), which owns their directories. Every directory above os.TempDir()
// must then be searchable by that user (it is for /tmp).
//
// No server outlives this process: on Linux each postmaster gets a parent-death signal (SIGKILL), so it dies
// with the process however that ends, and its backends exit as soon as they notice, within a tenth of a
// second; elsewhere the caller must call StopAll on SIGINT/SIGTERM. StopAll also removes the directories; those
// of a process that died before its StopAll are removed by the next process that starts a server.
package pgserver

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
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

// Server is one real PostgreSQL server (a postmaster and the processes it forks) listening on 127.0.0.1.
type Server struct {
	// Addr is the server's "127.0.0.1:port" address. It never changes, also not across Stop/Kill/Start.
	Addr string

	port     int
	dir      string   // server directory: data/ and, by default, postgres.log
	dataDir  string   // data directory (-D)
	logPath  string   // the server's stdout and stderr
	settings []string // extra -c settings of New

	mu              sync.Mutex
	p               *childproc.Proc // current postmaster; nil or exited when stopped
	lastOrphanKills int             // processes the last Kill had to SIGKILL (for tests)
}

// Options are a new server's settings besides pgserver's own.
type Options struct {
	// Name prefixes the server's directory (e.g. "shared", "private", "lbbench").
	Name string
	// Settings are extra server settings as "name=value" (e.g. "fsync=off"), given to postgres as -c name=value
	// after the defaults, which they override; listen_addresses, port and unix_socket_directories are
	// pgserver's and refused.
	Settings []string
	// LogPath receives the server's output (log_min_messages=warning); empty: postgres.log in the server's
	// directory, removed with it.
	LogPath string
}

// defaultSettings are pgserver's settings, before the caller's.
func (s *Server) defaultSettings() []string {
	return []string{
		"listen_addresses=127.0.0.1",
		"port=" + strconv.Itoa(s.port),
		"unix_socket_directories=", // TCP only: socket paths have a length limit and need a shared directory
		"max_connections=200",
		"shared_buffers=16MB",
		"fsync=on",
		"synchronous_commit=on",
		"log_min_messages=warning",
	}
}

// args returns the postgres command line: the data directory, then pgserver's settings, then the caller's.
func (s *Server) args() []string {
	args := []string{"-D", s.dataDir}
	for _, kv := range append(s.defaultSettings(), s.settings...) {
		args = append(args, "-c", kv)
	}
	return args
}

// CheckSettings normalizes settings as New takes them ("name=value", the name lowered and both sides trimmed) and
// refuses those that are not name=value or that set what pgserver sets itself (listen_addresses, port,
// unix_socket_directories).
func CheckSettings(settings []string) ([]string, error) {
	var out []string
	for _, kv := range settings {
		name, value, ok := strings.Cut(kv, "=")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("setting %q is not name=value", kv)
		case name == "listen_addresses" || name == "port" || name == "unix_socket_directories":
			return nil, fmt.Errorf("setting %q: %s is set by pgserver", kv, name)
		}
		out = append(out, name+"="+value)
	}
	return out, nil
}

var (
	errBind  = errors.New("address already in use")
	errStale = errors.New("the previous server's processes still hold its shared memory or lock file")
)

// launch starts the postmaster once and waits until it accepts connections. The caller holds s.mu.
func (s *Server) launch(deadline time.Time) error {
	off := childproc.FileSize(s.logPath)
	p, err := spawn(bin.postgres, s.args(), s.dir, s.logPath)
	if err != nil {
		return err
	}
	s.p = p
	if err := s.waitReady(p, off, deadline); err != nil {
		shutdownProc(p, syscall.SIGQUIT)
		return err
	}
	return nil
}

// waitReady waits until postmaster p has written "ready" into its postmaster.pid and then answers a
// connection, until p exits or the deadline passes. If p exited because its port was taken or a previous
// server of the data directory was still around (see the log from offset off), the error wraps errBind or
// errStale.
func (s *Server) waitReady(p *childproc.Proc, off int64, deadline time.Time) error {
	pidFile := filepath.Join(s.dataDir, "postmaster.pid")
	want := strconv.Itoa(p.Pid())
	for {
		if p.Exited() {
			log := childproc.LogFrom(s.logPath, off)
			switch {
			case strings.Contains(log, "Address already in use"):
				return fmt.Errorf("postgres on %s exited: %w", s.Addr, errBind)
			case strings.Contains(log, "is still in use"), strings.Contains(log, "lock file") && strings.Contains(log, "already exists"):
				return fmt.Errorf("postgres on %s exited: %w", s.Addr, errStale)
			}
			return fmt.Errorf("postgres on %s exited before accepting connections: %v", s.Addr, p.Err())
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

// New makes a server directory (a copy of the template cluster, made by initdb on first use) and starts a
// postgres server in it on a free port, retrying on other ports when the chosen one turns out to be taken; it
// returns once the server accepts connections (waiting at most 30 s). Remove shuts it down and removes its
// directory.
//
// With "fsync=off" a committed row still survives Kill (the commit has written the log to the kernel, which a
// killed process cannot take back; only a crash of the machine could), and the restart after a Kill skips
// crash recovery's fsync of every file: a fraction of a second instead of seconds. Keep the default where
// durability on disk or the cost of commits is what matters.
func New(o Options) (*Server, error) {
	settings, err := CheckSettings(o.Settings)
	if err != nil {
		return nil, err
	}
	if err := CheckBinaries(); err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = "server"
	}
	dir, err := newServerDir(name)
	if err != nil {
		return nil, err
	}
	logPath := o.LogPath
	if logPath == "" {
		logPath = filepath.Join(dir, "postgres.log")
	}
	deadline := time.Now().Add(readyTimeout)
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		var ports []int
		if ports, err = childproc.FreePorts(1); err != nil {
			break
		}
		port := ports[0]
		s := &Server{
			Addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			port:     port,
			dir:      dir,
			dataDir:  filepath.Join(dir, "data"),
			logPath:  logPath,
			settings: settings,
		}
		s.mu.Lock()
		err = s.launch(deadline)
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			err = fmt.Errorf("%w\n--- postgres log %s ---\n%s", err, logPath, childproc.LogTail(logPath))
			break
		}
	}
	os.RemoveAll(dir)
	if errors.Is(err, errBind) {
		err = fmt.Errorf("postgres: no usable port after %d attempts: %w", maxPortAttempts, err)
	}
	return nil, err
}

// Remove shuts the server down (immediate shutdown: its data is thrown away) and removes its directory.
func (s *Server) Remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		shutdownProc(s.p, syscall.SIGQUIT)
	}
	os.RemoveAll(s.dir)
}

// URL returns the connection string of the server's "postgres" database, as the superuser "postgres" over
// TCP without TLS: "postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable".
func (s *Server) URL() string { return s.DatabaseURL("postgres") }

// DatabaseURL is URL for the database named db.
func (s *Server) DatabaseURL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: s.Addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Dir is the server's directory: its data directory (data/) is in it, and postgres.log unless Options.LogPath
// named another file.
func (s *Server) Dir() string { return s.dir }

// LogPath is the file that receives the server's output.
func (s *Server) LogPath() string { return s.logPath }

// Pid returns the postmaster's process id, 0 while the server is stopped. Its backends are its children.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.p.Exited() {
		return 0
	}
	return s.p.Pid()
}

// Running reports whether the postmaster runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p != nil && !s.p.Exited()
}

// Stop shuts the server down cleanly (fast shutdown: open transactions are rolled back, sessions ended, a
// checkpoint written; SIGKILL after 30 s) and waits until all its processes are gone. The data directory and
// the port stay for a later Start. Stopping a stopped server is a no-op.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		shutdownProc(s.p, syscall.SIGINT)
	}
}

// Kill crashes the server: SIGKILL to the postmaster, like kill -9, with no shutdown of any kind. Its backends
// and auxiliary processes exit on their own when they notice the postmaster is gone, within tens of
// milliseconds (those still there after 5 s are sent SIGKILL too); Kill returns once they all are gone, so that
// Start can reuse the data directory and port (postgres refuses to start while a process of the old server
// still holds its shared memory) and recover from the write-ahead log what was committed. Killing a stopped
// server is a no-op.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.lastOrphanKills = killProc(s.p)
	}
}

// Start starts a stopped or killed server again on the same address and data directory, so the committed data
// is still there (after a Kill, postgres first replays its write-ahead log), and waits (at most 30 s) until it
// accepts connections. Starting a running server is a no-op. The error includes the server log.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil && !s.p.Exited() {
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
		err = fmt.Errorf("restarting postgres on %s: %w\n--- postgres log %s ---\n%s", s.Addr, err, s.logPath, childproc.LogTail(s.logPath))
	}
	return err
}

// StopAll stops every postgres server (and initdb) this process started that still runs, concurrently
// (immediate shutdown: their data is thrown away), and removes their directories and the template cluster. A
// later New starts over.
func StopAll() {
	stopAllProcs()
	removeBase()
}
