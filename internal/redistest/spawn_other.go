//go:build !linux

package redistest

import "os/exec"

// installSignalHandler reports whether Main should install a SIGINT/SIGTERM
// handler that stops all redis processes before exiting. Without parent-death
// signals (Linux only) this is the only way to avoid orphans on Ctrl-C.
const installSignalHandler = true

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
