package childproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process started by a Registry: tracked until it has exited and been reaped.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // Wait result; valid after done is closed
}

// Registry holds the children that one helper (redistest, pgserver) started and that still run, so that the
// helper can stop them all at its end. Name is the helper's, in the header line Spawn writes to a child's log.
type Registry struct {
	Name string

	mu    sync.Mutex
	procs map[*Proc]struct{}
}

// Spawn starts cmd with Start, its standard output and error appended to logPath after a header line that names
// the command, and tracks it until it has exited.
func (r *Registry) Spawn(cmd *exec.Cmd, logPath string) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child keeps its own descriptor
	name := cmd.Args[0]
	fmt.Fprintf(logf, "=== %s %s: %s %s\n", r.Name, time.Now().Format(time.RFC3339Nano), name, QuoteArgs(cmd.Args[1:]))
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	r.mu.Lock()
	if r.procs == nil {
		r.procs = map[*Proc]struct{}{}
	}
	r.procs[p] = struct{}{}
	r.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		r.mu.Lock()
		delete(r.procs, p)
		r.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// StopAll calls stop on every process of r that still runs, concurrently, and returns when every call has.
func (r *Registry) StopAll(stop func(*Proc)) {
	r.mu.Lock()
	ps := make([]*Proc, 0, len(r.procs))
	for p := range r.procs {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); stop(p) }()
	}
	wg.Wait()
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited and was reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (exec.Cmd.Wait's result); valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Exited reports whether the process has exited and was reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits at most d for the process to exit and reports whether it did.
func (p *Proc) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Terminate sends sig and waits at most grace for the process to exit. It reports whether the process is gone:
// false when it still runs, or the signal could not be sent.
func (p *Proc) Terminate(sig os.Signal, grace time.Duration) bool {
	if p.Exited() {
		return true
	}
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return false
	}
	return p.Wait(grace)
}

// Kill sends SIGKILL and waits until the process has been reaped.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// StopOnSignal has a SIGINT or SIGTERM call stop and exit the process with 128 + the signal's number, where the
// children do not die with their parent (DiesWithParent is false); the function it returns stops listening. On
// Linux it does nothing: the kernel stops the children.
func StopOnSignal(stop func()) (cancel func()) {
	if DiesWithParent {
		return func() {}
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigc
		stop()
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}()
	return func() { signal.Stop(sigc) }
}

var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// FreePorts returns n distinct free loopback TCP ports for children to listen on, never one that this process
// has handed out before. All n listeners are held open together so they cannot collide with each other.
func FreePorts(n int) ([]int, error) {
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
