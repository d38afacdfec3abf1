package graphiql

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// The vendored assets are the npm files vendor.txt names, byte for byte (their SRI hashes), the page asks for them
// with those hashes, and the handler serves every one of them and nothing else.
func TestVendoredAssets(t *testing.T) {
	list, err := os.ReadFile("vendor.txt")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile("page.html")
	h := Handler()
	n := 0
	for _, line := range strings.Split(string(list), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		body, err := os.ReadFile("assets/" + f[2])
		if err != nil {
			t.Errorf("%s: %v", f[2], err)
			continue
		}
		if f[3] != "-" {
			sum := sha256.Sum256(body)
			if got := "sha256-" + base64.StdEncoding.EncodeToString(sum[:]); got != f[3] {
				t.Errorf("%s: %s, vendor.txt says %s", f[2], got, f[3])
			}
			if !strings.Contains(string(page), `/graphiql/assets/`+f[2]+`" integrity="`+f[3]+`"`) {
				t.Errorf("page.html does not load %s with integrity %s", f[2], f[3])
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/graphiql/assets/"+f[2], nil))
		if rec.Code != http.StatusOK || rec.Body.Len() != len(body) {
			t.Errorf("GET %s: %d, %d bytes", f[2], rec.Code, rec.Body.Len())
		}
	}
	if n != 7 {
		t.Errorf("vendor.txt lists %d files, want 7", n)
	}
	entries, _ := os.ReadDir("assets")
	if len(entries) != n {
		t.Errorf("assets/ holds %d files, vendor.txt lists %d", len(entries), n)
	}
	for path, want := range map[string]int{"/graphiql": 200, "/graphiql/": 200, "/graphiql/page.js": 200,
		"/graphiql/assets/nope.js": 404, "/graphiql/vendor.txt": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/graphiql", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /graphiql: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/graphiql", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") ||
		strings.Contains(csp, "http") {
		t.Errorf("CSP %q", csp)
	}
}
