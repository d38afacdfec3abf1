package main

import (
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	for addr, want := range map[string]int{strings.TrimPrefix(live.URL, "http://"): 0, closed: 1} {
		hc := exec.Command(bin, "healthcheck")
		hc.Env = append(os.Environ(), "LISTEN_ADDR="+addr)
		err := hc.Run()
		if code := hc.ProcessState.ExitCode(); code != want {
			t.Errorf("healthcheck of %s: exit %d (%v), want %d", addr, code, err, want)
		}
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
