package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
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

// waitReady polls addr with PING until it answers +PONG, the process exits,
// or the deadline passes. If the process exited because it could not bind
// (see logPath from offset logOff), the returned error wraps errBind.
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
