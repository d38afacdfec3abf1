// Package web is the live dashboard: static HTML, CSS and JavaScript modules embedded in the binary and served
// at "/". There is no build step and nothing is loaded from a CDN; the page talks to the server's GraphQL API
// at /graphql (HTTP POST for queries, graphql-transport-ws on the same path for topUpdates and rankUpdates).
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// file is one embedded file, ready to serve.
type file struct {
	name        string
	body        []byte
	etag        string
	contentType string
}

// Handler returns the handler that serves the dashboard: "/" and "/index.html" give the page, "/<name>" the
// page's assets. Unknown paths are 404, methods other than GET and HEAD 405. Responses carry an ETag and
// "Cache-Control: no-cache" (browsers revalidate, so a new binary's assets are picked up at once) and a
// Content-Security-Policy that allows only same-origin scripts, styles and connections.
func Handler() http.Handler {
	files := map[string]*file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		name := strings.TrimPrefix(p, "static")
		files[name] = &file{name: name, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
			contentType: ct}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error()) // cannot happen: the files are compiled in
	}
	files["/"] = files["/index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data:; connect-src 'self'"+socketOrigins(r.Host)+"; base-uri 'none'; "+
			"form-action 'self'; object-src 'none'")
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	})
}

// socketOrigins returns " ws://host wss://host" for the CSP connect-src: 'self' covers websockets to the same
// host in current browsers, older ones need them listed. A host with unexpected characters is left out rather
// than echoed into the policy.
func socketOrigins(host string) string {
	if host == "" || strings.IndexFunc(host, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c))
	}) >= 0 {
		return ""
	}
	return " ws://" + host + " wss://" + host
}
