package pgserver

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

// minMajor is the oldest PostgreSQL release pgserver supports (DROP DATABASE ... WITH (FORCE), which pgtest uses,
// came in 13).
const minMajor = 13

// installHint says how to get PostgreSQL.
const installHint = "install PostgreSQL >= 13 (apt-get install -y postgresql, or sh scripts/test-deps.sh)"

// binaries are the PostgreSQL programs pgserver runs.
type binaries struct {
	initdb, postgres string
	major            int // e.g. 15
}

var (
	binOnce sync.Once
	bin     binaries
	binErr  error
)

// CheckBinaries reports an error, with a hint to install them, unless initdb and postgres of PostgreSQL >= 13
// are found (looked up once per process: on PATH, else in `pg_config --bindir`, else in the newest
// /usr/lib/postgresql/*/bin).
func CheckBinaries() error {
	binOnce.Do(func() {
		bin, binErr = findBinaries(exec.LookPath, "/usr/lib/postgresql")
	})
	return binErr
}

// findBinaries finds initdb and postgres: both on PATH (lookPath), else in the directory `pg_config --bindir`
// names (pg_config found with lookPath), else in the newest <libDir>/<version>/bin that has both. It checks
// that postgres is PostgreSQL 13 or newer.
func findBinaries(lookPath func(string) (string, error), libDir string) (binaries, error) {
	var b binaries
	var tried []string
	inDir := func(dir string) bool {
		i, p := filepath.Join(dir, "initdb"), filepath.Join(dir, "postgres")
		if isExec(i) && isExec(p) {
			b.initdb, b.postgres = i, p
			return true
		}
		tried = append(tried, dir)
		return false
	}
	i, err1 := lookPath("initdb")
	p, err2 := lookPath("postgres")
	found := err1 == nil && err2 == nil
	if found {
		b.initdb, b.postgres = i, p
	} else {
		tried = append(tried, "PATH")
	}
	if pgConfig, err := lookPath("pg_config"); !found && err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			found = inDir(strings.TrimSpace(string(out)))
		}
	}
	if !found {
		dirs, _ := filepath.Glob(filepath.Join(libDir, "*", "bin"))
		slices.SortFunc(dirs, func(a, b string) int { // newest first
			return -compareVersions(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
		})
		for _, d := range dirs {
			if found = inDir(d); found {
				break
			}
		}
		if len(dirs) == 0 {
			tried = append(tried, filepath.Join(libDir, "*", "bin"))
		}
	}
	if !found {
		return b, fmt.Errorf("PostgreSQL's initdb and postgres not found (looked in %s); %s", strings.Join(tried, ", "), installHint)
	}
	out, err := exec.Command(b.postgres, "--version").Output()
	if err != nil {
		return b, fmt.Errorf("%s --version: %v; %s", b.postgres, err, installHint)
	}
	m := regexp.MustCompile(`\(PostgreSQL\) (\d+)`).FindSubmatch(out)
	if m == nil {
		return b, fmt.Errorf("%s --version printed %q, not a PostgreSQL version; %s", b.postgres, strings.TrimSpace(string(out)), installHint)
	}
	b.major, _ = strconv.Atoi(string(m[1]))
	if b.major < minMajor {
		return b, fmt.Errorf("%s is PostgreSQL %d; %s", b.postgres, b.major, installHint)
	}
	return b, nil
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// compareVersions compares dotted version numbers such as "9.6" and "15" numerically; a part that is not a
// number counts as 0.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// The base directory of a process, <os.TempDir()>/pgserver-*, holds the template cluster (template/), the initdb
// log, the owner file and one directory per server (a data directory, data/, and its log, postgres.log unless
// the caller names another). It belongs to the run user and is removed by StopAll, or by a later process's
// sweep (sweepStale) if this one dies first.
var base struct {
	sync.Mutex
	dir     string
	err     error
	servers int // servers made so far, naming their directories

	template     string        // template data directory, once made
	templateErr  error         // why it could not be made
	templateTook time.Duration // how long initdb took
}

// baseDir returns the base directory, making it on first use.
func baseDir() (string, error) {
	if base.dir == "" && base.err == nil {
		base.dir, base.err = makeBaseDir()
	}
	return base.dir, base.err
}

func makeBaseDir() (string, error) {
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return "", err
	}
	if uid, _, switched := runUser(); switched {
		// The run user must reach its directories through every directory above them.
		for d := tmp; ; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				return "", err
			}
			if !searchable(fi.Mode(), fi.Sys()) {
				return "", fmt.Errorf("postgres runs as uid %d (this process runs as root), which cannot search %s (mode %v): set TMPDIR to a directory below world-searchable ones, e.g. /tmp", uid, d, fi.Mode().Perm())
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	sweepStale(tmp)
	dir, err := os.MkdirTemp(tmp, basePrefix)
	if err != nil {
		return "", err
	}
	me := self()
	err = os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %d\n", me.pid, me.start), 0o644)
	if err == nil {
		err = chownRun(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// ownerFile, in a base directory, names the process that made it: its PID and start time.
const ownerFile = "owner"

// basePrefix names base directories; legacyPrefix is what internal/pgtest named them before this package took
// its servers over (swept too).
const (
	basePrefix   = "pgserver-"
	legacyPrefix = "pgtest-"
)

// sweepStale removes the base directories in tmp whose process is gone without removing them (it was killed,
// or a test binary timed out: StopAll never ran). Their servers died with it.
func sweepStale(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, basePrefix+"*"))
	legacy, _ := filepath.Glob(filepath.Join(tmp, legacyPrefix+"*"))
	for _, d := range append(dirs, legacy...) {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not ours, or just being made
		}
		var owner procID
		if _, err := fmt.Sscan(string(b), &owner.pid, &owner.start); err == nil && !alive(owner) {
			os.RemoveAll(d)
		}
	}
}

// removeBase removes the base directory; a later New makes a new one (and runs initdb again).
func removeBase() {
	base.Lock()
	defer base.Unlock()
	if base.dir != "" {
		os.RemoveAll(base.dir)
	}
	base.dir, base.err, base.template, base.templateErr = "", nil, "", nil
}

// newServerDir makes a fresh server directory holding a copy of the template cluster in data/ and returns it,
// running initdb first if no server was made before.
func newServerDir(name string) (string, error) {
	base.Lock()
	if _, err := baseDir(); err != nil {
		base.Unlock()
		return "", err
	}
	if base.template == "" && base.templateErr == nil {
		start := time.Now()
		base.template, base.templateErr = initTemplate(base.dir)
		base.templateTook = time.Since(start)
	}
	if base.templateErr != nil {
		base.Unlock()
		return "", base.templateErr
	}
	base.servers++
	dir := filepath.Join(base.dir, fmt.Sprintf("%s%d", name, base.servers))
	template := base.template
	base.Unlock()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if err := chownRun(dir); err != nil {
		return "", err
	}
	if err := copyTree(template, filepath.Join(dir, "data")); err != nil {
		return "", fmt.Errorf("copying the template cluster: %w", err)
	}
	return dir, nil
}

// initTemplate runs initdb into <dir>/template: superuser "postgres", trust authentication, UTF8, locale C, time
// zone UTC (from childEnv), and no fsync of the new files (--no-sync: the template is only copied; the servers
// themselves fsync).
func initTemplate(dir string) (string, error) {
	data := filepath.Join(dir, "template")
	logPath := filepath.Join(dir, "initdb.log")
	args := []string{"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"}
	p, err := spawn(bin.initdb, args, dir, logPath)
	if err != nil {
		return "", err
	}
	if !p.Wait(initdbTimeout) {
		killProc(p)
		return "", fmt.Errorf("initdb did not finish within %v\n--- initdb log %s ---\n%s", initdbTimeout, logPath, childproc.LogTail(logPath))
	}
	if p.Err() != nil {
		return "", fmt.Errorf("initdb: %v\n--- initdb log %s ---\n%s", p.Err(), logPath, childproc.LogTail(logPath))
	}
	return data, nil
}

// copyTree copies the directory tree src to dst (which must not exist) with the same permissions, owned by the
// run user. It copies directories, regular files and symbolic links; anything else is an error.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(target, mode.Perm()); err != nil {
				return err
			}
		case mode.IsRegular():
			if err := copyFile(path, target, mode.Perm()); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: cannot copy a file of mode %v", path, mode)
		}
		return chownRun(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
