package pgserver

import (
	"os"
	"os/exec"
	"strings"
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

// procs are the processes (postmasters, initdb) this package started that still run.
var procs = childproc.Registry{Name: "pgserver"}

// spawn starts path with args in dir as the run user (see runUser), sending stdout and stderr to logPath, and
// with the parent-death signal of childproc.
func spawn(path string, args []string, dir, logPath string) (*childproc.Proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = sysProcAttr()
	return procs.Spawn(cmd, logPath)
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

// shutdownProc sends sig (SIGINT: fast shutdown, SIGQUIT: immediate shutdown), waits up to stopGrace for the
// postmaster, which exits only after all its processes did, and kills the whole server if it is not done by
// then. It returns once the postmaster has been reaped and its processes are gone.
func shutdownProc(p *childproc.Proc, sig syscall.Signal) {
	if !p.Terminate(sig, stopGrace) {
		killProc(p)
	}
}

// killProc sends SIGKILL to the postmaster, like kill -9, and waits until it has been reaped and the processes it
// had forked are gone: PostgreSQL's backends and auxiliary processes notice the postmaster's death and exit on
// their own (within tens of milliseconds, also in the middle of a statement); those still there after orphanGrace are sent SIGKILL. It returns
// how many had to be. The postmaster is stopped (SIGSTOP) while its children are listed, so that it cannot fork
// one more unseen.
func killProc(p *childproc.Proc) (stragglers int) {
	if p.Exited() {
		return 0
	}
	_ = p.Cmd.Process.Signal(syscall.SIGSTOP)
	kids := descendants(p.Pid())
	p.Kill()
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
func stopAllProcs() { procs.StopAll(func(p *childproc.Proc) { shutdownProc(p, syscall.SIGQUIT) }) }
