//go:build !linux

package pgserver

import (
	"os"
	"syscall"
)

// procID names a process.
type procID struct {
	pid   int
	start uint64
}

// self returns this process's procID.
func self() procID { return procID{pid: os.Getpid()} }

// descendants is not available outside Linux: a killed postmaster's processes are not waited for, and Start
// retries while they still hold the old server's shared memory.
func descendants(int) []procID { return nil }

// alive reports whether a process with p's PID exists.
func alive(p procID) bool { return syscall.Kill(p.pid, 0) == nil }
