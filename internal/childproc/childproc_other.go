//go:build !linux

// Package childproc starts child processes that die with their parent where the platform allows it.
package childproc

import "os/exec"

// DiesWithParent is false outside Linux: there is no parent-death signal, so callers must stop their children
// on SIGINT/SIGTERM themselves.
const DiesWithParent = false

// Start starts cmd.
func Start(cmd *exec.Cmd) error { return cmd.Start() }
