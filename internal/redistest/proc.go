package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
	// readyTimeout bounds how long a freshly started redis-server may take to
	// answer PING.
	readyTimeout = 10 * time.Second
	// stopGrace is how long a redis-server gets to exit after SIGTERM before
	// it is sent SIGKILL.
	stopGrace = 3 * time.Second
	// maxPortAttempts is how many times a new server is retried on fresh
	// ports when the chosen port turns out to be taken.
	maxPortAttempts = 5
)

// proc is one running redis-server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // Wait result; valid after done is closed
}

var live = struct {
	sync.Mutex
	procs map[*proc]struct{}
}{procs: map[*proc]struct{}{}}

// spawn starts name with args, sending stdout and stderr to logPath.
func spawn(name string, args []string, dir, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child keeps its own descriptor
	fmt.Fprintf(logf, "=== redistest %s: %s %s\n", time.Now().Format(time.RFC3339Nano), name, childproc.QuoteArgs(args))
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
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

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to stopGrace, then SIGKILLs, and always waits
// until the process has been reaped.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = p.cmd.Process.Kill()
	}
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stopAllProcs stops every redis process started by this package that is
// still running, concurrently.
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
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
}

var errBind = errors.New("address already in use")

// waitReady polls addr with PING until it answers +PONG, the process exits,
// or the deadline passes. If the process exited because it could not bind
// (see logPath from offset logOff), the returned error wraps errBind.
func waitReady(p *proc, addr, logPath string, logOff int64, deadline time.Time) error {
	var last error
	for {
		if p.exited() {
			log := childproc.LogFrom(logPath, logOff)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("redis-server on %s exited: %w", addr, errBind)
			}
			return fmt.Errorf("redis-server on %s exited before becoming ready: %v", addr, p.err)
		}
		if last = ping(addr, 500*time.Millisecond); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING: %v", addr, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends an inline PING over a fresh connection and expects +PONG.
func ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("unexpected PING reply %q", strings.TrimSpace(line))
	}
	return nil
}

var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freePorts returns n distinct free loopback TCP ports, never handing out a
// port this process has handed out before. All n listeners are held open
// together so they cannot collide with each other.
func freePorts(n int) ([]int, error) {
	ports.Lock()
	defer ports.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("could not find free loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if ports.used[port] {
			continue
		}
		ports.used[port] = true
		out = append(out, port)
	}
	return out, nil
}
