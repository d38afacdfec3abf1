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

// Asset is one embedded file, ready to serve (see ServeAssets).
type Asset struct {
	name        string
	body        []byte
	etag        string
	contentType string
}

// NewAsset prepares name's body to be served; its content type comes from the name's extension unless given.
func NewAsset(name string, body []byte, contentType string) *Asset {
	if contentType == "" {
		contentType = mime.TypeByExtension(path.Ext(name))
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	sum := sha256.Sum256(body)
	return &Asset{name: name, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		contentType: contentType}
}

// ServeAssets serves the assets by URL path: unknown paths are 404, methods other than GET and HEAD 405.
// Responses carry an ETag and "Cache-Control: no-cache" (browsers revalidate, so a new binary's assets are
// picked up at once) and the Content-Security-Policy csp gives for the request.
func ServeAssets(assets map[string]*Asset, csp func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := assets[r.URL.Path]
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
		h.Set("Content-Security-Policy", csp(r))
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	})
}

// Handler returns the handler that serves the dashboard: "/" and "/index.html" give the page, "/<name>" the
// page's assets (see ServeAssets), with a Content-Security-Policy that allows only same-origin scripts, styles
// and connections.
func Handler() http.Handler {
	files := map[string]*Asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static")
		files[name] = NewAsset(name, body, "")
		return nil
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error()) // cannot happen: the files are compiled in
	}
	files["/"] = files["/index.html"]
	return ServeAssets(files, func(r *http.Request) string {
		return "default-src 'self'; script-src 'self'; style-src 'self'; " +
			"img-src 'self' data:; connect-src 'self'" + socketOrigins(r.Host) + "; base-uri 'none'; " +
			"form-action 'self'; object-src 'none'"
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
