//go:build !linux

package main

import "os/exec"

// startChild starts cmd. Outside Linux there is no parent-death signal: children are stopped by the tool's
// cleanup and signal handler only.
func startChild(cmd *exec.Cmd) error { return cmd.Start() }
