// Package scripts holds the shell scripts of the repository's tooling; its tests check them.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakePath returns a directory for PATH holding every tool the script may look for, except those in hide, as
// small stand-ins (the script only asks whether they exist, and node for its version).
func fakePath(t *testing.T, hide map[string]bool, nodeVersion string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"redis-server", "redis-cli", "chromium", "initdb", "postgres"} {
		if !hide[tool] {
			write(tool, "exit 0")
		}
	}
	if !hide["node"] {
		major := strings.SplitN(strings.TrimPrefix(nodeVersion, "v"), ".", 2)[0]
		write("node", `case "$1" in --version) echo `+nodeVersion+`;; -e) [ `+major+` -ge 18 ];; esac`)
	}
	for _, tool := range []string{"sed", "id"} { // used by the script itself
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs the script with PATH=path, only checking; env adds variables. The PostgreSQL directory it searches
// (/usr/lib/postgresql) is an empty one unless env names another.
func run(t *testing.T, path string, env ...string) (string, int, time.Duration) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "test-deps.sh")
	cmd.Env = append([]string{"PATH=" + path, "LB_TEST_DEPS_INSTALL=0", "LB_TEST_DEPS_PG_LIBDIR=" + t.TempDir()}, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code, time.Since(start)
}

// With everything present the check passes quietly, in well under a second; each missing tool is named in one
// line with the command that installs it, and nothing runs after that.
func TestDepsScript(t *testing.T) {
	out, code, took := run(t, fakePath(t, nil, "v20.1.0"))
	if code != 0 || out != "" || took > time.Second {
		t.Fatalf("all present: exit %d in %v, output %q", code, took, out)
	}
	packages := map[string]string{"redis-server": "redis-server", "redis-cli": "redis-tools", "chromium": "chromium",
		"node": "nodejs", "initdb": "postgresql", "postgres": "postgresql"}
	for tool, pkg := range packages {
		out, code, _ := run(t, fakePath(t, map[string]bool{tool: true}, "v20.1.0"))
		want := "test-deps: missing " + tool + " ("
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], want) ||
			!strings.HasSuffix(lines[0], "install it with: apt-get install -y "+pkg) {
			t.Fatalf("without %s: exit %d, output\n%s", tool, code, out)
		}
	}
	out, code, _ = run(t, fakePath(t, map[string]bool{"redis-server": true, "redis-cli": true, "chromium": true,
		"node": true, "initdb": true, "postgres": true}, ""))
	if code != 1 || strings.Count(out, "test-deps: missing ") != 6 {
		t.Fatalf("none present: exit %d, output\n%s", code, out)
	}
	out, code, _ = run(t, fakePath(t, nil, "v16.20.0"))
	if code != 1 || !strings.Contains(out, "missing node (node is v16.20.0, the JavaScript tests need Node.js 18") {
		t.Fatalf("node 16: exit %d, output\n%s", code, out)
	}
}

// PostgreSQL's programs are found where Debian puts them, off PATH: in the directory `pg_config --bindir` names,
// or in /usr/lib/postgresql/<version>/bin.
func TestDepsScriptFindsPostgreSQL(t *testing.T) {
	noPG := map[string]bool{"initdb": true, "postgres": true}
	cluster := func(dir string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}

	path := fakePath(t, noPG, "v20.1.0")
	bindir := cluster(filepath.Join(t.TempDir(), "bin"))
	if err := os.WriteFile(filepath.Join(path, "pg_config"), []byte("#!/bin/sh\n[ \"$1\" = --bindir ] && echo "+bindir+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := run(t, path); code != 0 || out != "" {
		t.Fatalf("with pg_config: exit %d, output\n%s", code, out)
	}

	lib := t.TempDir()
	cluster(filepath.Join(lib, "15", "bin"))
	if out, code, _ := run(t, fakePath(t, noPG, "v20.1.0"), "LB_TEST_DEPS_PG_LIBDIR="+lib); code != 0 || out != "" {
		t.Fatalf("in %s/15/bin: exit %d, output\n%s", lib, code, out)
	}
}

// When it may install, the script asks apt-get for each missing package once (initdb and postgres are both in
// postgresql).
func TestDepsScriptInstallsEachPackageOnce(t *testing.T) {
	path := fakePath(t, map[string]bool{"initdb": true, "postgres": true, "redis-cli": true}, "v20.1.0")
	log := filepath.Join(t.TempDir(), "apt-get.log")
	for name, body := range map[string]string{
		"id":      `[ "$1" = -u ] && echo 0`,
		"apt-get": `echo "$@" >>` + log,
		"env":     `shift; "$@"`, // env DEBIAN_FRONTEND=noninteractive apt-get ...
	} {
		os.Remove(filepath.Join(path, name))
		if err := os.WriteFile(filepath.Join(path, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "test-deps.sh")
	cmd.Env = []string{"PATH=" + path, "LB_TEST_DEPS_PG_LIBDIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 { // the fake apt-get installs nothing
		t.Fatalf("exit %v, output\n%s", err, out)
	}
	if !strings.Contains(string(out), "test-deps: installing redis-tools postgresql with apt-get") {
		t.Errorf("output\n%s", out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "update -qq\ninstall -y -qq redis-tools postgresql" {
		t.Errorf("apt-get calls:\n%s", got)
	}
}
