//go:build linux

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}

// start starts a server for t with settings, removed in t's cleanup.
func start(t *testing.T, settings ...string) *Server {
	t.Helper()
	s, err := New(Options{Name: "test", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Remove)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func queryString(t *testing.T, c *pgx.Conn, sql string) string {
	t.Helper()
	var v string
	if err := c.QueryRow(ctxT(t), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// tree returns the server's running processes: the postmaster and every process below it.
func (s *Server) tree() []procID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.p.Exited() {
		return nil
	}
	pid := s.p.Pid()
	_, _, start, _ := stat(pid)
	return append([]procID{{pid, start}}, descendants(pid)...)
}

// templateTook is how long this process's initdb took.
func templateTook() time.Duration {
	base.Lock()
	defer base.Unlock()
	return base.templateTook
}

func TestStart(t *testing.T) {
	var procs []procID
	t.Run("run", func(t *testing.T) {
		begin := time.Now()
		s := start(t)
		t.Logf("Start took %v (initdb of the template, once per test binary: %v)", time.Since(begin), templateTook())
		if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
			t.Fatalf("Addr = %q, want 127.0.0.1:port", s.Addr)
		}
		if want := "postgres://postgres@" + s.Addr + "/postgres?sslmode=disable"; s.URL() != want {
			t.Fatalf("URL = %q, want %q", s.URL(), want)
		}
		c := connect(t, s.URL())
		if v, _ := strconv.Atoi(queryString(t, c, "SHOW server_version_num")); v < minMajor*10000 {
			t.Errorf("server_version_num = %d, want >= %d", v, minMajor*10000)
		}
		for setting, want := range map[string]string{
			"fsync":                   "on",
			"synchronous_commit":      "on",
			"full_page_writes":        "on",
			"max_connections":         "200",
			"listen_addresses":        "127.0.0.1",
			"port":                    strconv.Itoa(s.port),
			"unix_socket_directories": "",
			"log_min_messages":        "warning",
			"server_encoding":         "UTF8",
			"TimeZone":                "UTC",
			"data_directory":          s.dataDir,
		} {
			if got := queryString(t, c, "SHOW "+setting); got != want {
				t.Errorf("SHOW %s = %q, want %q", setting, got, want)
			}
		}
		if got := queryString(t, c, "SELECT datcollate FROM pg_database WHERE datname = current_database()"); got != "C" {
			t.Errorf("collation = %q, want C", got)
		}
		if got := queryString(t, c, "SELECT current_user"); got != "postgres" {
			t.Errorf("current_user = %q, want postgres", got)
		}
		if err := s.Start(); err != nil { // already running: no-op
			t.Fatalf("Start on a running server: %v", err)
		}
		procs = s.tree()
		if len(procs) == 0 || s.Pid() != procs[0].pid {
			t.Errorf("Pid = %d, want the postmaster's (%v)", s.Pid(), procs)
		}
		if !strings.HasPrefix(s.LogPath(), s.Dir()) || childproc.FileSize(s.LogPath()) == 0 {
			t.Errorf("log %s (%d bytes), want postgres.log in %s", s.LogPath(), childproc.FileSize(s.LogPath()), s.Dir())
		}
		checkRunUser(t, s, procs)
	})
	assertGone(t, procs)
}

// checkRunUser checks that the server's processes and files belong to nobody when the tests run as root and
// to the tests' user otherwise.
func checkRunUser(t *testing.T, s *Server, procs []procID) {
	t.Helper()
	want := os.Geteuid()
	if want == 0 {
		want = nobodyID
		if uid, _, switched := runUser(); !switched || uid == 0 {
			t.Fatalf("runUser = %d, %v as root", uid, switched)
		} else {
			want = uid
		}
	}
	if len(procs) < 2 {
		t.Fatalf("server processes = %v, want the postmaster and its auxiliary processes", procs)
	}
	for _, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)\s+(\d+)`).FindSubmatch(b)
		if m == nil || string(m[1]) != strconv.Itoa(want) || string(m[2]) != strconv.Itoa(want) {
			t.Errorf("process %d runs as %q, want uid %d", p.pid, m, want)
		}
	}
	for _, path := range []string{s.dir, s.dataDir, filepath.Join(s.dataDir, "PG_VERSION"), filepath.Join(s.dataDir, "base")} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != want {
			t.Errorf("%s belongs to uid %d, want %d", path, uid, want)
		}
	}
}

// New refuses settings that are not name=value or that are pgserver's own, and normalizes the others.
func TestBadSettings(t *testing.T) {
	for _, bad := range []string{"fsync", "=on", "port=1", "Listen_Addresses=*", "unix_socket_directories=/tmp"} {
		if _, err := CheckSettings([]string{bad}); err == nil {
			t.Errorf("CheckSettings(%q) accepted it", bad)
		}
		if s, err := New(Options{Settings: []string{bad}}); err == nil {
			s.Remove()
			t.Errorf("New with %q started a server", bad)
		}
	}
	if got, err := CheckSettings([]string{" Work_Mem = 8MB", "fsync=off"}); err != nil || strings.Join(got, ",") != "work_mem=8MB,fsync=off" {
		t.Errorf("CheckSettings = %q, %v", got, err)
	}
}

// A row whose commit returned survives kill -9 of the server; a transaction still open does not. Kill leaves
// no process behind, the backends of the killed postmaster exit on their own, and the restarted server has the
// same address and data; so has one restarted after a clean Stop, also when its port is taken for a moment.
func TestKillKeepsCommitted(t *testing.T) {
	var procs []procID
	t.Run("run", func(t *testing.T) {
		s := start(t)
		url := s.URL()
		ctx := ctxT(t)
		c := connect(t, url)
		if _, err := c.Exec(ctx, "CREATE TABLE ledger (id int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "INSERT INTO ledger VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		open := connect(t, url)
		tx, err := open.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO ledger VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		// A backend in the middle of a statement, besides the idle ones.
		busy := connect(t, url)
		sleepDone := make(chan error, 1)
		go func() { _, err := busy.Exec(context.Background(), "SELECT pg_sleep(60)"); sleepDone <- err }()
		waitFor(t, func() bool {
			return queryString(t, c, "SELECT count(*)::text FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'") == "1"
		})

		before := s.tree()
		addr := s.Addr
		begin := time.Now()
		s.Kill()
		t.Logf("Kill took %v for %d processes", time.Since(begin), len(before))
		assertGone(t, before)
		if s.lastOrphanKills != 0 {
			t.Errorf("Kill had to SIGKILL %d backends, want them to exit on their own", s.lastOrphanKills)
		}
		if err := <-sleepDone; err == nil {
			t.Error("pg_sleep(60) returned without error across Kill")
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Fatal("the port still accepts connections after Kill")
		}
		s.Kill() // no-op

		begin = time.Now()
		if err := s.Start(); err != nil {
			t.Fatalf("Start after Kill: %v", err)
		}
		t.Logf("Start after Kill (crash recovery) took %v", time.Since(begin))
		if s.Addr != addr {
			t.Fatalf("Addr changed across Kill/Start: %s -> %s", addr, s.Addr)
		}
		c = connect(t, url)
		if got := queryString(t, c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM ledger"); got != "1" {
			t.Fatalf("rows after Kill/Start = %s, want 1 (the committed row, not the open transaction's)", got)
		}
		if _, err := c.Exec(ctx, "INSERT INTO ledger VALUES (3)"); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, s.tree()...)

		before = s.tree()
		s.Stop()
		assertGone(t, before)
		s.Stop() // no-op
		if err := s.Start(); err != nil {
			t.Fatalf("Start after Stop: %v", err)
		}
		c = connect(t, url)
		if got := queryString(t, c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM ledger"); got != "1,3" {
			t.Fatalf("rows after Stop/Start = %s, want 1,3", got)
		}
		procs = append(procs, s.tree()...)

		// Start waits while the port is briefly taken by someone else.
		s.Stop()
		l, err := net.Listen("tcp", s.Addr)
		if err != nil {
			t.Fatalf("occupying %s: %v", s.Addr, err)
		}
		time.AfterFunc(500*time.Millisecond, func() { l.Close() })
		if err := s.Start(); err != nil {
			t.Fatalf("Start while the port is busy for 500 ms: %v", err)
		}
		connect(t, url)
		procs = append(procs, s.tree()...)
	})
	assertGone(t, procs) // the cleanup's shutdown leaves nothing either
}

// A backend that does not exit after its postmaster was killed (here: it is stopped) is killed after
// orphanGrace; and a Start while one still holds the old server's shared memory waits for it. With fsync=off,
// committed rows survive Kill too.
func TestKillStragglers(t *testing.T) {
	s := start(t, "fsync=off")
	url := s.URL()
	if _, err := connect(t, url).Exec(ctxT(t), "CREATE TABLE ledger (id int); INSERT INTO ledger VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	backend := func() procID {
		c := connect(t, s.URL())
		var pid int
		if err := c.QueryRow(ctxT(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		_, _, start, _ := stat(pid)
		return procID{pid, start}
	}

	defer func(d time.Duration) { orphanGrace = d }(orphanGrace)
	orphanGrace = 200 * time.Millisecond
	stuck := backend()
	if err := syscall.Kill(stuck.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	before := s.tree()
	s.Kill()
	assertDead(t, before)
	if s.lastOrphanKills != 1 {
		t.Errorf("Kill sent SIGKILL to %d backends, want 1 (the stopped one)", s.lastOrphanKills)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}

	// Without Kill's wait, postgres refuses to start while a backend of the killed server lives; Start retries.
	stuck = backend()
	if err := syscall.Kill(stuck.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	before = s.tree()
	s.mu.Lock()
	if err := s.p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.p.Done()
	s.mu.Unlock()
	off := childproc.FileSize(s.logPath)
	time.AfterFunc(time.Second, func() { syscall.Kill(stuck.pid, syscall.SIGCONT) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if log := childproc.LogFrom(s.logPath, off); !strings.Contains(log, "pre-existing shared memory block") {
		t.Errorf("the first attempts did not meet the old backend; log:\n%s", log)
	}
	assertDead(t, before)
	if got := queryString(t, connect(t, url), "SELECT string_agg(id::text, ',') FROM ledger"); got != "1" {
		t.Errorf("rows after two kills with fsync=off: %s, want 1", got)
	}
}

// As root, the base directory must be reachable by the run user through every directory above it.
func TestBaseDirSearchable(t *testing.T) {
	if _, _, switched := runUser(); !switched {
		t.Skip("not root: postgres runs as this user")
	}
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(closed, "tmp")
	if err := os.Mkdir(inner, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", inner)
	if dir, err := makeBaseDir(); err == nil || !strings.Contains(err.Error(), "cannot search "+closed) {
		os.RemoveAll(dir)
		t.Fatalf("makeBaseDir under a 0700 directory: %q, %v", dir, err)
	}
}

// Private servers start in parallel, each on its own port and data, with its own settings.
func TestParallelStart(t *testing.T) {
	var (
		mu    sync.Mutex
		procs []procID
		addrs = map[string]bool{}
	)
	t.Run("group", func(t *testing.T) {
		for i := range 2 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				var settings []string
				want := map[string]string{"fsync": "on", "work_mem": "4MB", "synchronous_commit": "on"}
				if i == 1 {
					settings = []string{"fsync=off", "work_mem=8MB", " synchronous_commit = off"}
					want = map[string]string{"fsync": "off", "work_mem": "8MB", "synchronous_commit": "off"}
				}
				s := start(t, settings...)
				c := connect(t, s.URL())
				for setting, want := range want {
					if got := queryString(t, c, "SHOW "+setting); got != want {
						t.Errorf("SHOW %s = %q, want %q", setting, got, want)
					}
				}
				if _, err := c.Exec(ctxT(t), fmt.Sprintf("CREATE TABLE only_%d ()", i)); err != nil {
					t.Fatal(err)
				}
				if got := queryString(t, c, "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'"); got != fmt.Sprintf("only_%d", i) {
					t.Errorf("tables = %s, want only_%d (servers must be independent)", got, i)
				}
				mu.Lock()
				defer mu.Unlock()
				if addrs[s.Addr] {
					t.Errorf("address %s handed out twice", s.Addr)
				}
				addrs[s.Addr] = true
				procs = append(procs, s.tree()...)
			})
		}
	})
	assertGone(t, procs)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertDead checks that none of procs runs any more.
func assertDead(t *testing.T, procs []procID) {
	t.Helper()
	if len(procs) == 0 {
		if !t.Failed() {
			t.Fatal("no processes recorded")
		}
		return
	}
	for _, p := range procs {
		if alive(p) {
			t.Errorf("postgres process %d still runs", p.pid)
		}
	}
}

// assertGone checks that none of procs runs any more and that no postgres process runs below this one.
func assertGone(t *testing.T, procs []procID) {
	t.Helper()
	assertDead(t, procs)
	for _, p := range descendants(os.Getpid()) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.pid)); strings.HasPrefix(string(b), "postgres") {
			t.Errorf("unexpected postgres child process %d still runs", p.pid)
		}
	}
}

func TestFindBinaries(t *testing.T) {
	root := t.TempDir()
	script := func(dir, name, body string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cluster := func(dir, version string) {
		script(dir, "initdb", "exit 0")
		script(dir, "postgres", "echo 'postgres (PostgreSQL) "+version+" (Debian)'")
	}
	// lookIn looks programs up in dirs only, as exec.LookPath does on PATH.
	lookIn := func(dirs ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			for _, d := range dirs {
				if p := filepath.Join(d, name); isExec(p) {
					return p, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	lib := filepath.Join(root, "lib")
	cluster(filepath.Join(lib, "9.6", "bin"), "9.6.24")
	cluster(filepath.Join(lib, "13", "bin"), "13.16")
	cluster(filepath.Join(lib, "16", "bin"), "16.4")
	script(filepath.Join(lib, "17", "bin"), "postgres", "echo 'postgres (PostgreSQL) 17.0'") // no initdb
	onPath := filepath.Join(root, "path")
	cluster(onPath, "15.2")
	viaConfig := filepath.Join(root, "config", "bin")
	cluster(viaConfig, "14.1")
	withConfig := filepath.Join(root, "withconfig")
	script(withConfig, "pg_config", "[ \"$1\" = --bindir ] && echo "+viaConfig)
	old := filepath.Join(root, "old")
	cluster(old, "12.9")

	for _, tc := range []struct {
		name       string
		path       []string
		lib        string
		wantDir    string
		wantMajor  int
		wantErrSub string
	}{
		{name: "PATH first", path: []string{onPath, withConfig}, lib: lib, wantDir: onPath, wantMajor: 15},
		{name: "pg_config", path: []string{withConfig}, lib: lib, wantDir: viaConfig, wantMajor: 14},
		{name: "newest complete lib dir", lib: lib, wantDir: filepath.Join(lib, "16", "bin"), wantMajor: 16},
		{name: "missing", lib: filepath.Join(root, "none"), wantErrSub: "apt-get install -y postgresql"},
		{name: "too old", path: []string{old}, lib: filepath.Join(root, "none"), wantErrSub: "is PostgreSQL 12; install PostgreSQL >= 13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := findBinaries(lookIn(tc.path...), tc.lib)
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.initdb != filepath.Join(tc.wantDir, "initdb") || b.postgres != filepath.Join(tc.wantDir, "postgres") || b.major != tc.wantMajor {
				t.Errorf("found %+v, want %s, major %d", b, tc.wantDir, tc.wantMajor)
			}
		})
	}
}

// A base directory whose process is gone is removed (also one that internal/pgtest made before pgserver); one
// whose process runs, or that has no owner file (not pgserver's, or being made), stays.
func TestSweepStale(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	deadID := procID{pid: dead.Process.Pid}
	_, _, deadID.start, _ = stat(deadID.pid)
	if err := dead.Wait(); err != nil {
		t.Fatal(err)
	}
	me := self()
	for name, owner := range map[string]string{
		"pgserver-dead":    fmt.Sprintf("%d %d\n", deadID.pid, deadID.start),
		"pgserver-reused":  fmt.Sprintf("%d %d\n", me.pid, me.start+1), // same PID, another process
		"pgserver-live":    fmt.Sprintf("%d %d\n", me.pid, me.start),
		"pgserver-noowner": "",
		"pgtest-dead":      fmt.Sprintf("%d %d\n", deadID.pid, deadID.start), // internal/pgtest's, before pgserver
		"pgtest-live":      fmt.Sprintf("%d %d\n", me.pid, me.start),
		"other-dead":       fmt.Sprintf("%d %d\n", deadID.pid, deadID.start),
	} {
		if err := os.MkdirAll(filepath.Join(tmp, name, "template"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(tmp, name, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweepStale(tmp)
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{"other-dead", "pgserver-live", "pgserver-noowner", "pgtest-live"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
