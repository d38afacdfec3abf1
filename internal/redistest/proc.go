package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
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

// procs are the redis-server processes this package started that still run.
var procs = childproc.Registry{Name: "redistest"}

// spawn starts name with args in dir, sending stdout and stderr to logPath.
func spawn(name string, args []string, dir, logPath string) (*childproc.Proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	return procs.Spawn(cmd, logPath)
}

// stopProc sends SIGTERM, waits up to stopGrace, then SIGKILLs, and always waits until the process has been
// reaped.
func stopProc(p *childproc.Proc) {
	if !p.Terminate(syscall.SIGTERM, stopGrace) {
		p.Kill()
	}
}

// stopAllProcs stops every redis process started by this package that is still running, concurrently.
func stopAllProcs() { procs.StopAll(stopProc) }

var errBind = errors.New("address already in use")

// waitReady polls addr until the redis-server of process p answers there, the
// process exits, or the deadline passes. A server of another process on the
// same port (a test binary beside this one picked it too) does not count: p
// then exits unable to bind, and the returned error wraps errBind (see logPath
// from offset logOff), so the caller tries another port.
func waitReady(p *childproc.Proc, addr, logPath string, logOff int64, deadline time.Time) error {
	var last error
	for {
		if p.Exited() {
			log := childproc.LogFrom(logPath, logOff)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("redis-server on %s exited: %w", addr, errBind)
			}
			return fmt.Errorf("redis-server on %s exited before becoming ready: %v", addr, p.Err())
		}
		if last = pingOwn(addr, p.Pid(), 500*time.Millisecond); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING: %v", addr, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingOwn asks the server on addr for its process id (INFO server) and
// expects pid.
func pingOwn(addr string, pid int, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
		return fmt.Errorf("unexpected INFO reply %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("another redis-server answers on %s", addr)
	}
	return nil
}
