//go:build linux

package redistest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux every redis-server is started with a parent-death signal
// (SIGKILL), so the kernel kills it whenever the test binary dies for any
// reason (SIGINT, SIGTERM, SIGKILL, panic, -timeout). Linux delivers that
// signal when the *thread* that forked the child exits, so all processes are
// forked from one goroutine locked to its OS thread for the life of the
// process; that thread never exits before the process does.

// installSignalHandler reports whether Main should install a SIGINT/SIGTERM
// handler. It is not needed on Linux (see above), and not installing one
// leaves the signal disposition of the test process untouched.
const installSignalHandler = false

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

func startCmd(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive all children
			for r := range spawnCh {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
