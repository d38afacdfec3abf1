package main

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/server"
)

// TestDockerfileBuild builds the server with the Dockerfile's own build line (no container runtime here) and checks
// what the image relies on: a static binary (no interpreter, no shared libraries) that reports the build
// arguments with -version, a healthcheck subcommand that exits 0 or 1, and a final stage that runs it as non-root.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(df)
	var line string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "RUN CGO_ENABLED=0 go build ") {
			line = strings.TrimPrefix(l, "RUN CGO_ENABLED=0 ")
		}
	}
	if line == "" {
		t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build` line")
	}
	bin := filepath.Join(t.TempDir(), "leaderboard")
	line = strings.NewReplacer("${VERSION}", "v9.9.9-test", "${REVISION}", "0123abcd", "/out/leaderboard", bin).Replace(line)
	args := shellWords(line)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v9.9.9-test") || !strings.Contains(string(out), "0123abcd") {
		t.Errorf("-version: %q %v", out, err)
	}
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	defer live.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	up := strings.TrimPrefix(live.URL, "http://")
	for _, c := range []struct {
		env  string   // LISTEN_ADDR
		args []string // after healthcheck
		want int
	}{
		{up, nil, 0},
		{closed, nil, 1},
		{closed, []string{"-listen", up}, 0}, // -listen wins over LISTEN_ADDR, as the server's own flag does
		{up, []string{"-listen", closed}, 1},
	} {
		hc := exec.Command(bin, append([]string{"healthcheck"}, c.args...)...)
		hc.Env = append(os.Environ(), "LISTEN_ADDR="+c.env)
		err := hc.Run()
		if code := hc.ProcessState.ExitCode(); code != c.want {
			t.Errorf("healthcheck %v with LISTEN_ADDR=%s: exit %d (%v), want %d", c.args, c.env, code, err, c.want)
		}
	}
	// The build stage's Go is the one go.mod names, to the patch release.
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "toolchain go"); ok {
			goLine = strings.TrimSpace(v) // a toolchain line, when there is one, is what builds
		}
	}
	if want := "FROM golang:" + goLine + " AS build"; goLine == "" || !strings.Contains(text, want+"\n") {
		t.Errorf("the Dockerfile's build stage is not %q (go.mod's Go)", want)
	}

	final := text[strings.LastIndex(text, "\nFROM "):]
	for _, want := range []string{"FROM scratch", "USER 65532:65532", `HEALTHCHECK`, `"/leaderboard", "healthcheck"`,
		"ca-certificates.crt"} {
		if !strings.Contains(final, want) {
			t.Errorf("the final stage lacks %q", want)
		}
	}
}

// shellWords splits a command line at spaces, keeping double-quoted parts (quotes removed) in one word.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case r == ' ' && !inQuote:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestRunKeepsAHeapFloor: the command holds GC_HEAP_FLOOR while it serves (its /metrics show the GOGC and heap
// goal the floor set) and gives the process its GOGC back when it stops.
func TestRunKeepsAHeapFloor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const floor = 96 << 20
	env := map[string]string{"LISTEN_ADDR": addr, "GC_HEAP_FLOOR": fmt.Sprint(floor), "LOG_LEVEL": "error"}
	cfg, err := server.LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	// The floor adjusts after each collection, from that collection's live heap: collect until the metrics show
	// its goal (bounded). A goal above it is the moment after the live heap grew (a starting server allocates),
	// until the next collection sets GOGC again.
	var gogc, goal float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		gogc, goal = metricValue(t, addr, "go_gc_gogc_percent"), metricValue(t, addr, "go_gc_heap_goal_bytes")
		if (goal >= floor && goal <= floor*11/10) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if goal < floor || goal > floor*11/10 || gogc <= float64(base) {
		t.Errorf("while serving: go_gc_heap_goal_bytes %.0f, go_gc_gogc_percent %.0f; want a goal of the floor %d "+
			"(at most 10%% more) from a GOGC above the process's %d", goal, gogc, floor, base)
	}
	if live := metricValue(t, addr, "go_gc_heap_live_bytes"); live <= 0 || live >= floor {
		t.Errorf("go_gc_heap_live_bytes %.0f, want the small live heap of an idle server", live)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := debug.SetGCPercent(base); p != base {
		t.Errorf("GOGC %d after run returned, want the process's %d back", p, base)
	}
}

// metricValue reads one unlabelled metric from the server's /metrics.
func metricValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			if i < 100 { // the server may still be starting
				time.Sleep(50 * time.Millisecond)
				continue
			}
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return f
			}
		}
		t.Fatalf("/metrics has no %s", name)
	}
}
