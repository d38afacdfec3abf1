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
	"sync"
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

// startProfiles fetches the profiles for d (and the goroutines' stacks halfway; a fan-out step's execution trace
// too) in the background; the returned function waits for them.
func (e *env) startProfiles(ctx context.Context, d time.Duration) func() {
	name := e.profileName
	e.profileName = ""
	if name == "" || e.pprofAddr == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // where the goroutines wait, halfway through (stacks with counts)
		select {
		case <-time.After(d / 2):
		case <-ctx.Done():
			return
		}
		file := filepath.Join(e.dir, name+".goroutines.txt")
		if err := fetch(ctx, "http://"+e.pprofAddr+"/debug/pprof/goroutine?debug=1", file); err != nil {
			e.logf("profile %s: %v", file, err)
		}
	})
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	kinds := []struct{ path, suffix string }{
		{fmt.Sprintf("profile?seconds=%d", secs), ".cpu.pprof"},
		{fmt.Sprintf("allocs?seconds=%d", secs), ".allocs.pprof"},
	}
	if strings.HasPrefix(name, "fanout-") { // where requests wait while a fan-out runs: go tool trace -pprof=sched
		kinds = append(kinds, struct{ path, suffix string }{fmt.Sprintf("trace?seconds=%d", traceSeconds), ".trace"})
	}
	for _, k := range kinds {
		wg.Go(func() {
			file := filepath.Join(e.dir, name+k.suffix)
			if err := fetch(ctx, "http://"+e.pprofAddr+"/debug/pprof/"+k.path, file); err != nil {
				e.logf("profile %s: %v", file, err)
				return
			}
			e.logf("saved %s", file)
		})
	}
	return wg.Wait
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
