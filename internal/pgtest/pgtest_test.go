//go:build linux

package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// withChildEnv makes the test binary TestWith's child: its TestMain composes With with redistest.With.
const withChildEnv = "PGTEST_WITH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(withChildEnv) == "1" {
		withChild(m)
	}
	Main(m)
}

// The servers TestWithServersChild started (in the child).
var childPG, childRedis string

// withChild runs the tests under With(redistest.With(m)), then prints Run's status and whether the shared
// PostgreSQL and Redis servers still answer, and exits 0: With must return, not exit.
func withChild(m *testing.M) {
	code := With(redistest.With(m)).Run()
	answers := func(addr string) bool {
		if addr == "" {
			return false
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	fmt.Printf("\nafter Run: code=%d postgres=%s:%v redis=%s:%v\n", code, childPG, answers(childPG), childRedis,
		answers(childRedis))
	os.Exit(0)
}

// With composes with redistest.With: the tests run with both packages' shared servers, Run returns the tests'
// status (here a failure) instead of exiting, and both servers are stopped when it returns.
func TestWith(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestWithServersChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), withChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`after Run: code=(\d+) postgres=(\S*):(\w+) redis=(\S*):(\w+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the child did not report:\n%s", out)
	}
	if string(m[1]) != "1" || string(m[2]) == "" || string(m[3]) != "false" || string(m[4]) == "" ||
		string(m[5]) != "false" {
		t.Errorf("after Run: code %s (want 1), postgres %s answers %s, redis %s answers %s (want both started and "+
			"stopped)\n%s", m[1], m[2], m[3], m[4], m[5], out)
	}
}

// TestWithServersChild is TestWith's child: it starts both shared servers, checks they answer, and fails.
func TestWithServersChild(t *testing.T) {
	if os.Getenv(withChildEnv) != "1" {
		t.Skip("TestWith's child")
	}
	pg := Shared(t)
	if _, err := connect(t, pg.URL()).Exec(ctxT(t), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	rs := redistest.SharedStandalone(t)
	if err := rs.Client(t).Ping(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	childPG, childRedis = pg.Addr, rs.Addr
	t.Error("failing on purpose: Run must return this status")
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

// A private server answers on its URL until its test's cleanup, which removes it; Kill, Start and Stop reach
// pgserver (a committed row survives the Kill), and Start on a running server is a no-op.
func TestStart(t *testing.T) {
	var addr string
	t.Run("run", func(t *testing.T) {
		s := Start(t, "fsync=off")
		addr = s.Addr
		if want := "postgres://postgres@" + s.Addr + "/postgres?sslmode=disable"; s.URL() != want {
			t.Fatalf("URL = %q, want %q", s.URL(), want)
		}
		url := s.Database(t)
		if _, err := connect(t, url).Exec(ctxT(t), "CREATE TABLE ledger (id int); INSERT INTO ledger VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatalf("Start on a running server: %v", err)
		}
		s.Kill()
		if s.Running() {
			t.Fatal("running after Kill")
		}
		if err := s.Start(); err != nil {
			t.Fatalf("Start after Kill: %v", err)
		}
		if got := queryString(t, connect(t, url), "SELECT string_agg(id::text, ',') FROM ledger"); got != "1" {
			t.Errorf("rows after Kill/Start = %s, want 1", got)
		}
		s.Stop()
		if s.Running() {
			t.Fatal("running after Stop")
		}
	})
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the test's cleanup", addr)
	}
}

// Start refuses settings that are not name=value or that are pgtest's own.
func TestStartBadSettings(t *testing.T) {
	for _, bad := range []string{"fsync", "=on", "port=1", "Listen_Addresses=*", "unix_socket_directories=/tmp"} {
		if msg := fatalOf(t, func(tb testing.TB) { Start(tb, bad) }); msg == "" {
			t.Errorf("Start(%q) did not fail", bad)
		}
	}
}

// fatalTB records the first Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs f with a TB whose Fatalf ends f and returns Fatalf's message ("" if f returned normally).
func fatalOf(t *testing.T, f func(testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	return tb.msg
}

func TestSharedDatabases(t *testing.T) {
	s := Shared(t)
	if s2 := Shared(t); s2 != s {
		t.Fatal("Shared returned two servers")
	}
	var (
		mu    sync.Mutex
		names []string
	)
	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint("db", i), func(t *testing.T) {
				t.Parallel()
				url := s.Database(t)
				c := connect(t, url)
				ctx := ctxT(t)
				name := queryString(t, c, "SELECT current_database()")
				if !regexp.MustCompile(`^t[a-z0-9]+_testshareddatabases_group_db` + fmt.Sprint(i) + `$`).MatchString(name) {
					t.Errorf("database name %q", name)
				}
				if n := queryString(t, c, "SELECT count(*)::text FROM pg_tables WHERE schemaname = 'public'"); n != "0" {
					t.Errorf("a fresh database has %s tables", n)
				}
				if _, err := c.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Exec(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
					t.Fatal(err)
				}
				if got := queryString(t, c, "SELECT string_agg(v::text, ',') FROM t"); got != fmt.Sprint(i) {
					t.Errorf("rows = %s, want only %d (databases must be apart)", got, i)
				}
				mu.Lock()
				names = append(names, name)
				mu.Unlock()
			})
		}
		t.Run("pool", func(t *testing.T) {
			t.Parallel()
			pool := s.Pool(t)
			var name string
			if err := pool.QueryRow(ctxT(t), "SELECT current_database()").Scan(&name); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(pool.Config().ConnString(), "/"+name+"?sslmode=disable") {
				t.Errorf("pool on %q, connected to %q", pool.Config().ConnString(), name)
			}
			mu.Lock()
			names = append(names, name)
			mu.Unlock()
		})
	})
	if len(names) != 9 {
		t.Fatalf("databases = %v, want 9", names)
	}
	c := connect(t, s.URL())
	var left int
	if err := c.QueryRow(ctxT(t), "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the tests' databases are left after their cleanup", left)
	}

	mustPanic(t, "Stop on the shared server", s.Stop)
	mustPanic(t, "Kill on the shared server", s.Kill)
	if err := s.Start(); err == nil {
		t.Error("Start on the shared server returned nil")
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestDBName(t *testing.T) {
	re := regexp.MustCompile(`^t[a-z0-9]+(_[a-z0-9_]*)?$`)
	seen := map[string]bool{}
	for _, name := range []string{"plain", "With Spaces/and-Dashes", strings.Repeat("LongName/", 20), "ünï/#1", ""} {
		t.Run(name, func(t *testing.T) {
			for range 20 {
				n := dbName(t)
				if len(n) > maxNameLen || !re.MatchString(n) || strings.Contains(n, "__") {
					t.Errorf("dbName = %q", n)
				}
				if seen[n] {
					t.Errorf("dbName %q returned twice", n)
				}
				seen[n] = true
			}
		})
	}
}
