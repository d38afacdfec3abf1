//go:build linux

// Package childproc starts child processes that die with their parent: test helpers and the benchmark tool start
// redis-server, PostgreSQL and the leaderboard server, and none of them may outlive the process that started it.
// It owns their lifecycle in the test helpers (redistest, pgserver): a Registry of what each started, the stop
// of them all at the end or on a signal, their ports and their logs.
package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// DiesWithParent reports whether Start's children are killed by the kernel when this process dies, however it
// dies. On Linux they get a parent-death signal; elsewhere callers must stop them on SIGINT/SIGTERM themselves.
const DiesWithParent = true

// Linux delivers the parent-death signal when the *thread* that forked the child exits, so every child is forked
// from one goroutine locked to its OS thread for the life of the process.

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// Start starts cmd with SIGKILL as its parent-death signal.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawnCh {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
