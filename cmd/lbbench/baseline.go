package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildRevision builds the leaderboard server (the root package of the module in moduleDir) as it is at git
// revision rev of the repository that holds moduleDir, into the binary out. The revision's tree is extracted with
// `git archive` into a fresh temporary directory under tmpParent (os.TempDir() when empty) — neither the
// repository's files nor its worktree list are touched — built there with `go build`, and that directory is
// removed before buildRevision returns, whether the build succeeded, failed or was cancelled (ctx: Ctrl-C). It
// returns the full commit hash rev resolved to.
func buildRevision(ctx context.Context, moduleDir, rev, tmpParent, out string) (commit string, err error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("revision %q: not a revision", rev)
	}
	root, err := gitRoot(ctx, moduleDir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, moduleDir)
	if err != nil {
		return "", err
	}
	hash, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("revision %q: not a commit of %s", rev, root)
	}
	commit = strings.TrimSpace(string(hash))
	src, err := os.MkdirTemp(tmpParent, "lbbench-base-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := extractRevision(ctx, root, commit, src); err != nil {
		return "", fmt.Errorf("git archive %s: %w", commit[:12], err)
	}
	// No VCS stamp (the extracted tree has no .git) and no go.work from a parent of the temporary directory.
	if err := buildServer(ctx, filepath.Join(src, rel), out, "", []string{"GOWORK=off"}, "-buildvcs=false"); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("revision %s: %w", commit[:12], err)
	}
	return commit, nil
}

// extractRevision writes the tree of commit into dir: `git archive --format=tar` read with archive/tar (no tar
// binary needed). Only directories, regular files and symlinks inside dir are written.
func extractRevision(ctx context.Context, repo, commit, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", commit)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	r, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	xerr := untar(r, dir)
	if xerr != nil {
		_, _ = io.Copy(io.Discard, r) // let git finish (or fail on its own) instead of blocking on a full pipe
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if werr != nil {
		return fmt.Errorf("%w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return xerr
}

func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q leaves the directory", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, path); err != nil {
				return err
			}
		case tar.TypeXGlobalHeader: // git's pax header carrying the commit id
		default:
			return fmt.Errorf("archive entry %q: unsupported type %q", h.Name, h.Typeflag)
		}
	}
}

// errNoGit is returned by gitRoot outside a git checkout.
var errNoGit = errors.New("not a git checkout")

// gitRoot returns the top directory of the git checkout that holds dir.
func gitRoot(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, errNoGit)
	}
	return strings.TrimSpace(string(out)), nil
}
