// Package graphiql serves GraphiQL from the binary: the page at /graphiql and its assets (GraphiQL 4.1.2, React
// and ReactDOM 18.2.0, vendored from npm with their licences, see vendor.txt) under /graphiql/, so it works
// offline, air-gapped and behind strict proxies, and no visit is reported to a CDN.
package graphiql

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed page.html page.js assets
var files embed.FS

// csp allows only this origin: scripts (the vendored ones and page.js, no inline script), styles (GraphiQL also
// sets inline styles), images and fonts (GraphiQL inlines some as data: URLs), and connections (HTTP and the
// websocket to /graphql).
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self' ws: wss:; worker-src 'self' blob:; frame-ancestors 'none'"

type asset struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves GET and HEAD of /graphiql (the page), /graphiql/page.js and /graphiql/assets/<file>; anything
// else under /graphiql/ is 404. Responses carry an ETag and "Cache-Control: no-cache".
func Handler() http.Handler {
	assets := map[string]*asset{}
	add := func(urlPath, file string) {
		body, err := files.ReadFile(file)
		if err != nil {
			panic("graphiql: " + err.Error()) // cannot happen: the files are compiled in
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(file))
		if strings.HasPrefix(path.Base(file), "LICENSE") {
			ct = "text/plain; charset=utf-8"
		}
		assets[urlPath] = &asset{body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
			contentType: ct}
	}
	add("/graphiql", "page.html")
	add("/graphiql/", "page.html")
	add("/graphiql/page.js", "page.js")
	entries, _ := files.ReadDir("assets")
	for _, e := range entries {
		add("/graphiql/assets/"+e.Name(), "assets/"+e.Name())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
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
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}
