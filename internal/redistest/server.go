package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

// Server is one real redis-server process listening on 127.0.0.1.
//
// A Server returned by Standalone belongs to one test and is stopped, and its
// directory removed, when that test's cleanup runs. A Server returned by
// SharedStandalone lives until Main returns; it must not be stopped or
// restarted by tests (Stop and Start panic/fail on it).
type Server struct {
	// Addr is the server's "127.0.0.1:port" address. It never changes, also
	// not across Stop/Start.
	Addr string

	port    int
	busPort int    // cluster bus port; 0 for non-cluster servers
	dir     string // working directory (--dir)
	logPath string
	owner   testing.TB // test that owns the server; nil when shared
	shared  bool

	mu   sync.Mutex
	p    *childproc.Proc // current process; nil or exited when stopped
	pids []int           // every PID ever started for this server (for tests)
}

// serverArgs returns the redis-server command line for s.
func (s *Server) serverArgs() []string {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--protected-mode", "no",
		"--daemonize", "no",
	}
	if s.busPort != 0 {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, fmt.Sprintf("nodes-%d.conf", s.port)),
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return args
}

// launch starts the process once and waits for it to answer PING. The caller
// holds s.mu.
func (s *Server) launch(deadline time.Time) error {
	off := childproc.FileSize(s.logPath)
	p, err := spawn(redisServerPath, s.serverArgs(), s.dir, s.logPath)
	if err != nil {
		return err
	}
	s.p = p
	s.pids = append(s.pids, p.Pid())
	if err := waitReady(p, s.Addr, s.logPath, off, deadline); err != nil {
		stopProc(p)
		return err
	}
	return nil
}

// newServer starts a redis-server on fresh free ports in dir, retrying with
// other ports when the chosen ones turn out to be taken. cluster selects
// cluster mode; name names the log file (<dir>/<name>.log).
func newServer(dir, name string, cluster bool) (*Server, error) {
	deadline := time.Now().Add(readyTimeout)
	var err error
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		n := 1
		if cluster {
			n = 2
		}
		var ps []int
		if ps, err = childproc.FreePorts(n); err != nil {
			return nil, err
		}
		s := &Server{
			Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[0])),
			port:    ps[0],
			dir:     dir,
			logPath: filepath.Join(dir, name+".log"),
		}
		if cluster {
			s.busPort = ps[1]
		}
		s.mu.Lock()
		err = s.launch(deadline)
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			return nil, fmt.Errorf("%w\n--- redis-server log %s ---\n%s", err, s.logPath, childproc.LogTail(s.logPath))
		}
	}
	return nil, fmt.Errorf("redis-server: no usable port after %d attempts: %w", maxPortAttempts, err)
}

// Standalone starts a fresh, empty, non-persistent redis-server on a free
// 127.0.0.1 port and returns once it answers PING (waiting at most 10 s). The
// server is stopped (SIGTERM, then SIGKILL after 3 s) and its directory
// removed in tb's cleanup. It fails tb if redis-server is not installed or
// does not come up (the server log is included in the failure).
func Standalone(tb testing.TB) *Server {
	tb.Helper()
	requireBinaries(tb, false)
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s, err := newServer(dir, "redis", false)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatalf("redistest: starting standalone redis-server: %v", err)
	}
	s.owner = tb
	tb.Cleanup(func() {
		s.stop()
		os.RemoveAll(dir)
	})
	return s
}

// Options returns a new UniversalOptions with Addrs = [s.Addr] and go-redis
// defaults otherwise; callers may modify it.
func (s *Server) Options() *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: []string{s.Addr}}
}

// Client returns a new go-redis client (a *redis.Client, via
// redis.NewUniversalClient(s.Options())) that is closed in tb's cleanup.
func (s *Server) Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c := redis.NewUniversalClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop stops the server process (SIGTERM, SIGKILL after 3 s) and waits until
// it is gone. The port stays reserved for a later Start; data is lost (there
// is no persistence). Stopping a stopped server is a no-op. Stop panics on a
// shared server, which other tests are using.
func (s *Server) Stop() {
	if s.shared {
		panic("redistest: Stop called on a shared server; use redistest.Standalone for outage tests")
	}
	s.stop()
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		stopProc(s.p)
	}
}

// Start starts a stopped server again on the same address and waits (at most
// 10 s) until it answers PING. The restarted server is empty. Starting a
// running server is a no-op. On failure Start reports the error, including
// the server log, to the owning test (so it fails even if the result is
// ignored) and returns it.
func (s *Server) Start() error {
	if s.shared {
		return errors.New("redistest: Start called on a shared server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil && !s.p.Exited() {
		return nil
	}
	deadline := time.Now().Add(readyTimeout)
	var err error
	for {
		// The port can be briefly taken (e.g. by an outgoing connection);
		// keep retrying the same port until the deadline.
		if err = s.launch(deadline); err == nil || !errors.Is(err, errBind) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		err = fmt.Errorf("redistest: restarting redis-server on %s: %w\n--- redis-server log %s ---\n%s", s.Addr, err, s.logPath, childproc.LogTail(s.logPath))
		if s.owner != nil {
			s.owner.Errorf("%v", err)
		}
	}
	return err
}

// pidList returns the PIDs of all processes ever started for s.
func (s *Server) pidList() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.pids...)
}

var (
	redisServerPath string
	redisCLIPath    string
	lookOnce        sync.Once
	lookServerErr   error
	lookCLIErr      error
)

// requireBinaries fails tb unless redis-server (and, with cli, redis-cli) is
// on PATH.
func requireBinaries(tb testing.TB, cli bool) {
	tb.Helper()
	lookOnce.Do(func() {
		redisServerPath, lookServerErr = exec.LookPath("redis-server")
		redisCLIPath, lookCLIErr = exec.LookPath("redis-cli")
	})
	if lookServerErr != nil {
		tb.Fatalf("redistest: redis-server not found on PATH (%v); install Redis >= 7.0 (e.g. apt-get install redis-server, brew install redis)", lookServerErr)
	}
	if cli && lookCLIErr != nil {
		tb.Fatalf("redistest: redis-cli not found on PATH (%v); install Redis >= 7.0 (e.g. apt-get install redis-tools, brew install redis)", lookCLIErr)
	}
}
