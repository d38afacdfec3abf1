package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"
)

// version is the release this binary is, when its build says so: go build -ldflags "-X
// github.com/leaderboard/leaderboard/internal/server.version=v1.2.3". Otherwise the module version Go stamped
// (a `go install ...@v1.2.3`), else "dev".
var version = ""

// revision is the git commit, when the build says so (-X ...server.revision=<sha>, as the Dockerfile does: an
// image is built without .git); otherwise the VCS stamp of `go build -buildvcs=true`.
var revision = ""

// BuildInfo is what a binary knows of its build: the lb_build_info metric and `-version` show it.
type BuildInfo struct {
	Version  string // see version
	Revision string // the git commit it was built from ("unknown" outside a checkout), "+dirty" when modified
	Go       string // the Go release that built it
}

// Build returns this binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: version, Revision: "unknown", Go: runtime.Version()}
	if revision != "" {
		b.Revision = revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b.orDev()
	}
	if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if revision == "" {
				b.Revision = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true" && revision == ""
		}
	}
	if dirty && b.Revision != "unknown" {
		b.Revision += "+dirty"
	}
	return b.orDev()
}

func (b BuildInfo) orDev() BuildInfo {
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

func (b BuildInfo) String() string {
	return fmt.Sprintf("leaderboard %s (revision %s, %s)", b.Version, b.Revision, b.Go)
}

// healthcheckTimeout bounds the whole `healthcheck` request.
const healthcheckTimeout = 3 * time.Second

// Healthcheck asks the server listening on listenAddr (LISTEN_ADDR; an unspecified host means this machine) for
// /healthz, or /readyz with ready set, and returns nil when it answers 200. It is the `healthcheck` subcommand, for
// container images without a shell or curl.
func Healthcheck(ctx context.Context, listenAddr string, ready bool, out io.Writer) error {
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return fmt.Errorf("LISTEN_ADDR %q: %w", listenAddr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, body)
	}
	fmt.Fprintf(out, "%s: %s", url, body)
	return nil
}
