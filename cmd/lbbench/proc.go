package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

// Timeouts of the children the tool starts.
const (
	readyTimeout = 30 * time.Second // a child must answer (PING, /readyz) within this
	stopGrace    = 5 * time.Second  // after SIGTERM, then SIGKILL
)

// child is a process the tool started: redis-server or the leaderboard server.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string        // file receiving its stdout and stderr
	done chan struct{} // closed once it has exited and was reaped
}

func spawn(name, logPath string, env []string, bin string, args ...string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to stopGrace, then SIGKILLs; it returns once the process is reaped.
func (c *child) stop() {
	if c == nil || c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopGrace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// logTail returns the last few lines of the child's log, for error messages.
func (c *child) logTail() string {
	data, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startRedis starts a non-persistent redis-server on a free loopback port and waits until it answers PING.
func startRedis(ctx context.Context, dir string) (*child, string, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c, err := spawn("redis-server", filepath.Join(dir, "redis.log"), nil, "redis-server",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--protected-mode", "no", "--maxclients", "20000")
		if err != nil {
			return nil, "", err
		}
		if err = waitRedis(ctx, c, addr); err == nil {
			return c, addr, nil
		}
		c.stop()
		lastErr = fmt.Errorf("%w\n%s", err, c.logTail())
	}
	return nil, "", fmt.Errorf("redis-server did not start: %w", lastErr)
}

func waitRedis(ctx context.Context, c *child, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		if c.exited() {
			return errors.New("redis-server exited")
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildServer builds the leaderboard server (the root package of the module in moduleDir) into out: the benchmark
// measures the binary that ships. -trimpath keeps file system paths out of the binary, so that builds of the same
// sources in different directories (the working tree, a -baseline revision's temporary copy) are identical and
// share the build cache. overlay, when not empty, is a go build -overlay file (see profileOverlay); env is added
// to the environment of go build, args to its flags.
func buildServer(ctx context.Context, moduleDir, out, overlay string, env []string, args ...string) error {
	args = append([]string{"build", "-trimpath", "-o", out}, args...)
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	// go build does not remove its work directory when interrupted: it gets one of ours, removed here.
	gotmp, err := os.MkdirTemp(filepath.Dir(out), "gotmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(gotmp)
	cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
	cmd.Dir = moduleDir
	// Built as the Dockerfile builds it (CGO_ENABLED=0, -trimpath): the binary measured is the one the image
	// ships, and the test suite's builds of the server share their compiled packages.
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), append(env, "GOTMPDIR="+gotmp)...)
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	// Cancelled (Ctrl-C), go build and the compilers it runs are interrupted as a group, as Ctrl-C in a terminal
	// would (interrupting only go would leave the compilers running). Started through childproc, so that it also
	// dies if this process is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	if err := childproc.Start(cmd); err != nil {
		return fmt.Errorf("go build of the server: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("go build of the server: %w", ctx.Err())
		}
		return fmt.Errorf("go build of the server: %w\n%s", err, msg.Bytes())
	}
	return nil
}

// moduleDir returns the directory of the main module (the repository root).
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the leaderboard module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// Keys the benchmark configures on the server it starts.
const (
	submitKey = "bench-submit-key"
	adminKey  = "bench-admin-key"
)

// startServer runs the server binary against redisAddr on a free loopback port, its output going to logName in
// dir, and waits for /readyz.
func startServer(ctx context.Context, bin, dir, logName, redisEnv string, extraEnv ...string) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append([]string{
		"LISTEN_ADDR=" + addr,
		redisEnv, // REDIS_URL=... or REDIS_CLUSTER_ADDRS=...
		"API_KEYS=submit:" + submitKey + ",admin:" + adminKey,
		"LOG_LEVEL=warn",
		"DEMO=false",
		"MAX_CONNS_PER_ADDR=30000", // every benchmark subscriber comes from 127.0.0.1
		"MAX_CONNS=120000",         // the subscribers and the submitters' connections (default 10,000)
	}, extraEnv...)
	c, err := spawn("server", filepath.Join(dir, logName), env, bin)
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(ctx, c, addr); err != nil {
		c.stop()
		return nil, "", fmt.Errorf("server: %w", err)
	}
	return c, addr, nil
}

// waitReady waits until the process c answers 200 on http://addr/readyz.
func waitReady(ctx context.Context, c *child, addr string) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		if c.exited() {
			return fmt.Errorf("exited:\n%s", c.logTail())
		}
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("not ready at %s: %v\n%s", addr, err, c.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procUsage is what /proc says about a process: CPU time used so far and resident memory.
type procUsage struct {
	CPU    time.Duration // user + system
	RSS    int64         // bytes, now
	MaxRSS int64         // bytes, peak (VmHWM)
}

func readProcUsage(pid int) (procUsage, error) {
	var u procUsage
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	u.CPU = time.Duration(utime+stime) * time.Second / userHZ
	st, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer st.Close()
	sc := bufio.NewScanner(st)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.MaxRSS = kb << 10
		}
	}
	return u, nil
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit (children inherit it) and returns the new limit.
func raiseFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	}
	return r.Cur
}

// machineBusy is the CPU time all the machine's cores spent busy so far (every state of /proc/stat's cpu line but
// idle and iowait).
func machineBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest and guest_nice are already in user and nice
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ
}

// treeCPU is the CPU time (user + system) of process pid and of every process below it, those that exited
// included (a reaped child's time is in its parent's cutime and cstime): PostgreSQL's postmaster and its
// backends. 0 when pid is 0.
func treeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	kids := map[int][]int{}
	ticks := map[int]int64{}
	for _, en := range ents {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var t int64
		for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime (fields 14-17 of stat)
			v, _ := strconv.ParseInt(f[k], 10, 64)
			t += v
		}
		kids[ppid] = append(kids[ppid], p)
		ticks[p] = t
	}
	var sum int64
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		sum += ticks[queue[0]]
		queue = append(queue, kids[queue[0]]...)
	}
	return time.Duration(sum) * time.Second / userHZ
}

// userHZ is the clock ticks a second of /proc's CPU times (USER_HZ on Linux).
const userHZ = 100
