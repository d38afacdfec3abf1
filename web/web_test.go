package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leaderboard/leaderboard/web"
)

func get(t *testing.T, h http.Handler, method, path string, header map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	h := web.Handler()
	page := get(t, h, "GET", "/", nil)
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", page.StatusCode, page.Header.Get("Content-Type"))
	}
	body := readAll(t, page)
	// Every asset the page references is served with a sensible type, and nothing comes from elsewhere.
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("the page references only %d assets", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if strings.HasPrefix(ref, "/graphiql") || strings.HasPrefix(ref, "#") {
			continue
		}
		if strings.Contains(ref, "//") {
			t.Errorf("page loads %s from another origin", ref)
			continue
		}
		res := get(t, h, "GET", ref, nil)
		if res.StatusCode != 200 {
			t.Errorf("GET %s: %d", ref, res.StatusCode)
		}
	}
	for path, ct := range map[string]string{"/app.js": "text/javascript", "/board.js": "text/javascript",
		"/live.js": "text/javascript", "/style.css": "text/css", "/index.html": "text/html"} {
		res := get(t, h, "GET", path, nil)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, res.StatusCode, res.Header.Get("Content-Type"), ct)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: security headers missing: %v", path, res.Header)
		}
		// Revalidation: the ETag comes back as 304.
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", path)
		} else if again := get(t, h, "GET", path, map[string]string{"If-None-Match": etag}); again.StatusCode != 304 {
			t.Errorf("GET %s with its ETag: %d, want 304", path, again.StatusCode)
		}
	}
}

func TestHandlerRejectsOtherPathsAndMethods(t *testing.T) {
	h := web.Handler()
	for _, p := range []string{"/nope", "/static/app.js", "/../web.go", "/board.test.mjs", "/app.js/"} {
		if res := get(t, h, "GET", p, nil); res.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	if res := get(t, h, "POST", "/", nil); res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, want 405 with Allow", res.StatusCode)
	}
	if res := get(t, h, "HEAD", "/", nil); res.StatusCode != 200 {
		t.Errorf("HEAD /: %d", res.StatusCode)
	}
	// A Host header with odd characters is not echoed into the policy.
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "evil;script-src*"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if csp := rec.Header().Get("Content-Security-Policy"); strings.Contains(csp, "evil") {
		t.Errorf("policy echoes a bad host: %s", csp)
	}
}

// TestBoardJS runs the JavaScript unit tests (web/board.test.mjs) with Node: applying topUpdates is checked
// against pubsub/testdata/diffs.json, the table the Go diff logic is tested against, and period keys against
// leaderboard/testdata/periods.json, the table the Go period rules are tested against. Node is required: CI
// installs it, and a missing node fails this test rather than skipping it.
func TestBoardJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		for _, p := range []string{"/usr/bin/node", "/usr/local/bin/node"} {
			if _, e := os.Stat(p); e == nil {
				node, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatal("node (Node.js 18 or newer) is needed to test the dashboard's JavaScript: apt-get install nodejs")
	}
	diffs, err := filepath.Abs("../pubsub/testdata/diffs.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(diffs); err != nil {
		t.Fatalf("the shared diff table is missing: %v", err)
	}
	periods, err := filepath.Abs("../leaderboard/testdata/periods.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(periods); err != nil {
		t.Fatalf("the shared period table is missing: %v", err)
	}
	cmd := exec.Command(node, "--test", "board.test.mjs")
	cmd.Env = append(os.Environ(), "DIFFS_JSON="+diffs, "PERIODS_JSON="+periods, "NODE_DISABLE_COLORS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test board.test.mjs: %v\n%s", err, out)
	}
	// Guard against a runner that passes without running anything.
	if !regexp.MustCompile(`(?m)^# pass [1-9]`).Match(out) || !regexp.MustCompile(`(?m)^# fail 0$`).Match(out) {
		t.Fatalf("node --test ran no passing tests:\n%s", out)
	}
	t.Logf("%s", lastLines(string(out), 9))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
