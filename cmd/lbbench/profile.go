package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pprofFile is added to the server's package at build time with `go build -overlay` when -profile is set: the
// repository's server does not expose /debug/pprof, and the benchmark must not change it. It serves the
// standard profiles on LBBENCH_PPROF_ADDR, a separate loopback listener.
const pprofFile = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("LBBENCH_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
`

// profileOverlay writes the overlay that adds pprofFile to the package in root and returns its path.
func profileOverlay(dir, root string) (string, error) {
	src := filepath.Join(dir, "lbbench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofFile), 0o644); err != nil {
		return "", err
	}
	ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{
		filepath.Join(root, "zz_lbbench_pprof.go"): src}})
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, ov, 0o644)
}

// profileNext asks the next load step to record CPU and allocation profiles of the server during its measured
// phase, saved as <name>.cpu.pprof and <name>.allocs.pprof in the work directory. No-op without -profile.
func (e *env) profileNext(name string) {
	if e.o.Profile {
		e.profileName = name
	}
}

// startProfiles fetches the profiles for d (and the goroutines' stacks halfway) in the background; the returned function waits for them.
func (e *env) startProfiles(ctx context.Context, d time.Duration) func() {
	name := e.profileName
	e.profileName = ""
	if name == "" || e.pprofAddr == "" {
		return func() {}
	}
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	done := make(chan struct{}, 4)
	go func() { // where the goroutines wait, halfway through (stacks with counts)
		defer func() { done <- struct{}{} }()
		select {
		case <-time.After(d / 2):
		case <-ctx.Done():
			return
		}
		file := filepath.Join(e.dir, name+".goroutines.txt")
		if err := fetch(ctx, "http://"+e.pprofAddr+"/debug/pprof/goroutine?debug=1", file); err != nil {
			e.logf("profile %s: %v", file, err)
		}
	}()
	for _, kind := range []string{"profile", "allocs"} {
		go func() {
			defer func() { done <- struct{}{} }()
			file := filepath.Join(e.dir, name+map[string]string{"profile": ".cpu", "allocs": ".allocs"}[kind]+".pprof")
			if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", e.pprofAddr, kind, secs), file); err != nil {
				e.logf("profile %s: %v", file, err)
				return
			}
			e.logf("saved %s", file)
		}()
	}
	if strings.HasPrefix(name, "fanout-") { // where requests wait while a fan-out runs: go tool trace -pprof=sched
		go func() {
			defer func() { done <- struct{}{} }()
			file := filepath.Join(e.dir, name+".trace")
			if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", e.pprofAddr, traceSeconds), file); err != nil {
				e.logf("profile %s: %v", file, err)
				return
			}
			e.logf("saved %s", file)
		}()
	} else {
		done <- struct{}{}
	}
	return func() { <-done; <-done; <-done; <-done }
}

// traceSeconds is how long an execution trace of a fan-out step lasts (from the step's start): a trace of a server
// writing to 10,000 websockets grows by tens of MB a second.
const traceSeconds = 2

func fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
