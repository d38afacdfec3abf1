package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls f every 20 ms until it returns nil or d passes.
func eventually(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStandaloneStopStart(t *testing.T) {
	var pids []int
	t.Run("run", func(t *testing.T) {
		s := Standalone(t)
		if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
			t.Fatalf("Addr = %q, want 127.0.0.1:port", s.Addr)
		}
		c := s.Client(t)
		if _, ok := c.(*redis.Client); !ok {
			t.Fatalf("Client is %T, want *redis.Client", c)
		}
		ctx := ctxT(t)
		key := Prefix(t) + ":k"
		if err := c.Set(ctx, key, "v1", 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		if got, err := c.Get(ctx, key).Result(); err != nil || got != "v1" {
			t.Fatalf("GET = %q, %v; want v1", got, err)
		}
		if err := s.Start(); err != nil { // already running: no-op
			t.Fatalf("Start on running server: %v", err)
		}

		addr := s.Addr
		s.Stop()
		s.Stop() // idempotent
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := c.Ping(short).Err()
		cancel()
		if err == nil {
			t.Fatal("PING succeeded after Stop")
		}
		if err := pingOwn(addr, s.pids[len(s.pids)-1], 200*time.Millisecond); err == nil {
			t.Fatal("the stopped server still answers")
		}

		if err := s.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if s.Addr != addr {
			t.Fatalf("Addr changed across restart: %q -> %q", addr, s.Addr)
		}
		// The client's pooled connections died with the old process; it
		// must recover on its own.
		if err := eventually(3*time.Second, func() error { return c.Ping(ctx).Err() }); err != nil {
			t.Fatalf("PING after Start: %v", err)
		}
		if err := c.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after restart = %v, want redis.Nil (no persistence)", err)
		}
		if err := c.Set(ctx, key, "v2", 0).Err(); err != nil {
			t.Fatalf("SET after restart: %v", err)
		}

		// Start retries while the port is briefly taken by someone else.
		s.Stop()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("occupying %s: %v", addr, err)
		}
		time.AfterFunc(500*time.Millisecond, func() { l.Close() })
		if err := s.Start(); err != nil {
			t.Fatalf("Start while port busy for 500ms: %v", err)
		}
		if err := eventually(3*time.Second, func() error { return c.Ping(ctx).Err() }); err != nil {
			t.Fatalf("PING after second Start: %v", err)
		}

		pids = s.pidList()
		if len(pids) < 3 {
			t.Fatalf("pids = %v, want at least 3 processes", pids)
		}
		assertRunning(t, pids[len(pids)-1])
	})
	assertGone(t, pids)
}

func TestCluster(t *testing.T) {
	var pids []int
	t.Run("run", func(t *testing.T) {
		c := Cluster(t)
		if len(c.Addrs) != 3 {
			t.Fatalf("Addrs = %v, want 3", c.Addrs)
		}
		checkClusterRouting(t, c)
		for _, n := range c.nodes {
			pids = append(pids, n.pidList()...)
		}
	})
	assertGone(t, pids)
}

// checkClusterRouting writes keys with 100 hash tags through the cluster
// client and checks that CLUSTER KEYSLOT, CLUSTER SLOTS, go-redis routing
// and the node actually holding the key all agree.
func checkClusterRouting(t *testing.T, c *RedisCluster) {
	ctx := ctxT(t)
	cl := c.Client(t)
	cc, ok := cl.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Client is %T, want *redis.ClusterClient", cl)
	}
	owner := slotOwners(t, c)

	nodes := map[string]*redis.Client{}
	for _, a := range c.Addrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { n.Close() })
		nodes[a] = n
	}

	p := Prefix(t)
	slots := map[int64]bool{}
	used := map[string]int{}
	for i := range 100 {
		key := fmt.Sprintf("{tag%d}:%s", i, p)
		if err := cl.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := nodes[c.Addrs[i%3]].ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
		}
		slots[slot] = true
		want := owner[slot]
		master, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey(%s): %v", key, err)
		}
		if got := master.Options().Addr; got != want {
			t.Fatalf("key %s: slot %d is owned by %s (CLUSTER SLOTS) but go-redis routes to %s", key, slot, want, got)
		}
		used[want]++
		// The owning node must hold the key itself (no MOVED).
		if got, err := nodes[want].Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s directly on %s = %d, %v; want %d", key, want, got, err, i)
		}
	}
	if len(slots) < 90 {
		t.Errorf("100 hash tags hit only %d slots", len(slots))
	}
	if len(used) != 3 {
		t.Errorf("keys landed on %d nodes (%v), want all 3", len(used), used)
	}
}

// slotOwners maps every slot to the address of its master per CLUSTER SLOTS.
func slotOwners(t *testing.T, c *RedisCluster) map[int64]string {
	n := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer n.Close()
	//lint:ignore SA1019 CLUSTER SLOTS is deprecated in 7.0 but still served; it is the simplest slot map to check
	ranges, err := n.ClusterSlots(ctxT(t)).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	owner := map[int64]string{}
	for _, r := range ranges {
		for s := r.Start; s <= r.End; s++ {
			owner[int64(s)] = r.Nodes[0].Addr
		}
	}
	if len(owner) != clusterSlots {
		t.Fatalf("CLUSTER SLOTS covers %d slots, want %d", len(owner), clusterSlots)
	}
	return owner
}

func TestSharedAndTargets(t *testing.T) {
	if a, b := SharedStandalone(t), SharedStandalone(t); a != b {
		t.Fatal("SharedStandalone returned different servers")
	}
	ts := Targets(t)
	wantN := 2
	if v, _ := strconv.ParseBool(os.Getenv(NoClusterEnv)); v {
		wantN = 1
	}
	if len(ts) != wantN {
		t.Fatalf("Targets returned %d targets, want %d", len(ts), wantN)
	}
	if wantN == 2 {
		if a, b := SharedCluster(t), SharedCluster(t); a != b {
			t.Fatal("SharedCluster returned different clusters")
		}
	}
	for _, tg := range ts {
		t.Run(tg.Name, func(t *testing.T) {
			_, isCluster := tg.Client.(*redis.ClusterClient)
			if isCluster != tg.Cluster {
				t.Fatalf("Target %s: Cluster=%v but client is %T", tg.Name, tg.Cluster, tg.Client)
			}
			// Parallel writers on the shared server never see each other's keys.
			for i := range 4 {
				t.Run(fmt.Sprint("w", i), func(t *testing.T) {
					t.Parallel()
					ctx := ctxT(t)
					p := Prefix(t)
					board := "{" + p + "}:board"
					for j := range 20 {
						if err := tg.Client.ZAdd(ctx, board, redis.Z{Score: float64(j), Member: fmt.Sprint(j)}).Err(); err != nil {
							t.Fatalf("ZADD: %v", err)
						}
					}
					if n, err := tg.Client.ZCard(ctx, board).Result(); err != nil || n != 20 {
						t.Fatalf("ZCARD = %d, %v; want 20", n, err)
					}
				})
			}
		})
	}
	if wantN == 2 {
		checkClusterRouting(t, SharedCluster(t))
	}

	mustPanic(t, "Server.Stop on shared", func() { SharedStandalone(t).Stop() })
	if err := SharedStandalone(t).Start(); err == nil {
		t.Error("Start on shared server returned nil error")
	}
	if wantN == 2 {
		mustPanic(t, "RedisCluster.Stop on shared", func() { SharedCluster(t).Stop() })
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

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

func TestPrefix(t *testing.T) {
	seen := map[string]bool{}
	var mu sync.Mutex
	check := func(t *testing.T) {
		p := Prefix(t)
		if !prefixRE.MatchString(p) {
			t.Errorf("Prefix = %q: want 1-40 chars of [A-Za-z0-9_-]", p)
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[p] {
			t.Errorf("Prefix %q returned twice", p)
		}
		seen[p] = true
	}
	check(t)
	check(t)
	names := []string{
		"plain",
		"with spaces and {braces}:colons",
		strings.Repeat("very_long_name/", 10),
		"ünïcödé/#01",
		"",
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			for range 50 {
				check(t)
			}
		})
	}
	t.Run("tail", func(t *testing.T) {
		if p := Prefix(t); !strings.HasSuffix(p, "TestPrefix-tail") {
			t.Errorf("Prefix = %q, want it to end with the sanitized test name", p)
		}
	})
}

func assertRunning(t *testing.T, pid int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
		t.Errorf("redis-server pid %d not running: %v", pid, err)
	}
}

// assertGone checks that none of pids exists any more and that the only
// redis-server children of this process are the shared servers'.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		if !t.Failed() {
			t.Fatal("no pids recorded")
		}
		return
	}
	if runtime.GOOS != "linux" {
		return
	}
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !os.IsNotExist(err) {
			t.Errorf("redis-server pid %d still exists after cleanup (stat: %v)", pid, err)
		}
	}
	allowed := map[int]bool{}
	sharedStandaloneMu.Lock()
	if sharedStandalone != nil {
		for _, p := range sharedStandalone.pidList() {
			allowed[p] = true
		}
	}
	sharedStandaloneMu.Unlock()
	sharedClusterMu.Lock()
	if sharedCluster != nil {
		for _, n := range sharedCluster.nodes {
			for _, p := range n.pidList() {
				allowed[p] = true
			}
		}
	}
	sharedClusterMu.Unlock()
	for _, pid := range redisChildren(t) {
		if !allowed[pid] {
			t.Errorf("unexpected redis-server child process %d still running", pid)
		}
	}
}

// redisChildren lists the PIDs of redis-server processes whose parent is
// this test process (Linux only).
func redisChildren(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// Format: pid (comm) state ppid ...
		s := string(b)
		open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeIdx < open {
			continue
		}
		comm := s[open+1 : closeIdx]
		f := strings.Fields(s[closeIdx+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if ppid == self && strings.HasPrefix(comm, "redis-server") {
			out = append(out, pid)
		}
	}
	return out
}

func TestParallelStandalone(t *testing.T) {
	var (
		mu    sync.Mutex
		pids  []int
		addrs = map[string]bool{}
	)
	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				s := Standalone(t)
				c := s.Client(t)
				if err := c.Set(ctxT(t), "k", i, 0).Err(); err != nil {
					t.Fatalf("SET: %v", err)
				}
				if got, err := c.Get(ctxT(t), "k").Int(); err != nil || got != i {
					t.Fatalf("GET = %d, %v; want %d (servers must be independent)", got, err, i)
				}
				mu.Lock()
				defer mu.Unlock()
				if addrs[s.Addr] {
					t.Errorf("address %s handed out twice", s.Addr)
				}
				addrs[s.Addr] = true
				pids = append(pids, s.pidList()...)
			})
		}
	})
	assertGone(t, pids)
}

// TestMakeTestIgnoresNoCluster: NoClusterEnv is for quick local runs only; `make test` (what CI runs) keeps it out
// of its recipes' environment, so the cluster runs cannot be skipped there by a stray variable.
func TestMakeTestIgnoresNoCluster(t *testing.T) {
	makefile, err := filepath.Abs(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	probe := "include " + makefile + "\nprobe:\n\t@echo \"[$$" + NoClusterEnv + "]\"\n"
	cmd := exec.Command("make", "-s", "-C", filepath.Dir(makefile), "-f", "-", "probe")
	cmd.Stdin = strings.NewReader(probe)
	cmd.Env = append(os.Environ(), NoClusterEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "[]" {
		t.Errorf("a recipe of the Makefile sees %s=%s, want it unset", NoClusterEnv, got)
	}
}

// TestLaunchOnATakenPortIsNotReady: a redis-server launched on a port another redis-server already serves (a test
// binary beside this one picked the same free port) is not taken for ready because the other one answers: the
// launch fails with errBind, so newServer tries another port, and the other server is left alone.
func TestLaunchOnATakenPortIsNotReady(t *testing.T) {
	other := Standalone(t)
	dir := t.TempDir()
	port, _ := strconv.Atoi(other.Addr[strings.LastIndexByte(other.Addr, ':')+1:])
	s := &Server{Addr: other.Addr, port: port, dir: dir, logPath: filepath.Join(dir, "taken.log")}
	s.mu.Lock()
	err := s.launch(time.Now().Add(10 * time.Second))
	s.mu.Unlock()
	if !errors.Is(err, errBind) {
		t.Fatalf("launch on %s, served by pid %v: %v; want errBind", other.Addr, other.pids, err)
	}
	if err := pingOwn(other.Addr, other.pids[len(other.pids)-1], time.Second); err != nil {
		t.Fatalf("the other server after the failed launch: %v", err)
	}
}
