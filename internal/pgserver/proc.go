package pgserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

const (
	// readyTimeout bounds how long a postgres server may take from its start (crash recovery included) until it
	// accepts connections.
	readyTimeout = 30 * time.Second
	// initdbTimeout bounds the one initdb run of a process.
	initdbTimeout = 60 * time.Second
	// stopGrace is how long a postmaster gets to finish a fast or immediate shutdown before it is killed.
	stopGrace = 30 * time.Second
	// maxPortAttempts is how many times a new server is retried on fresh ports when the chosen port turns out to
	// be taken.
	maxPortAttempts = 5
)

// orphanGrace is how long the processes of a killed postmaster get to notice and exit on their own before they
// are sent SIGKILL too (a variable for the tests).
var orphanGrace = 5 * time.Second

// proc is one running process (a postmaster, or initdb).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // Wait result; valid after done is closed
}

var live = struct {
	sync.Mutex
	procs map[*proc]struct{}
}{procs: map[*proc]struct{}{}}

// spawn starts path with args in dir as the run user (see runUser), sending stdout and stderr to logPath, and
// with the parent-death signal of childproc.
func spawn(path string, args []string, dir, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child keeps its own descriptor
	fmt.Fprintf(logf, "=== pgserver %s: %s %s\n", time.Now().Format(time.RFC3339Nano), path, childproc.QuoteArgs(args))
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	live.Lock()
	live.procs[p] = struct{}{}
	live.Unlock()
	go func() {
		p.err = cmd.Wait()
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the environment of initdb and postgres: this process's, without the libpq and locale variables,
// with LC_ALL=C (English messages, which waitReady reads) and TZ=UTC (initdb writes it into the configuration).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" || k == "TZ" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "TZ=UTC")
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits at most d for the process to exit and reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// shutdown sends sig (SIGINT: fast shutdown, SIGQUIT: immediate shutdown), waits up to stopGrace for the
// postmaster, which exits only after all its processes did, and kills the whole server if it is not done by
// then. It returns once the postmaster has been reaped and its processes are gone.
func (p *proc) shutdown(sig syscall.Signal) {
	if p.exited() {
		return
	}
	if err := p.cmd.Process.Signal(sig); err == nil && p.wait(stopGrace) {
		return
	}
	p.kill()
}

// kill sends SIGKILL to the postmaster, like kill -9, and waits until it has been reaped and the processes it
// had forked are gone: PostgreSQL's backends and auxiliary processes notice the postmaster's death and exit on
// their own (within tens of milliseconds, also in the middle of a statement); those still there after orphanGrace are sent SIGKILL. It returns
// how many had to be. The postmaster is stopped (SIGSTOP) while its children are listed, so that it cannot fork
// one more unseen.
func (p *proc) kill() (stragglers int) {
	if p.exited() {
		return 0
	}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	kids := descendants(p.pid())
	_ = p.cmd.Process.Kill()
	<-p.done
	if waitGone(kids, orphanGrace) {
		return 0
	}
	for _, k := range kids {
		if alive(k) {
			stragglers++
			_ = syscall.Kill(k.pid, syscall.SIGKILL)
		}
	}
	waitGone(kids, stopGrace)
	return stragglers
}

// waitGone polls until none of ps is alive or d has passed, and reports whether they are all gone.
func waitGone(ps []procID, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		n := 0
		for _, k := range ps {
			if alive(k) {
				n++
			}
		}
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopAllProcs stops every process started by this package that is still running, concurrently, with SIGQUIT
// (a postmaster's immediate shutdown; initdb cleans up and exits).
func stopAllProcs() {
	live.Lock()
	ps := make([]*proc, 0, len(live.procs))
	for p := range live.procs {
		ps = append(ps, p)
	}
	live.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.shutdown(syscall.SIGQUIT) }()
	}
	wg.Wait()
}

var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freePort returns a free loopback TCP port that this process has not handed out before.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if !ports.used[port] {
			ports.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("could not find a free loopback port")
}
