// Package graphiql serves GraphiQL from the binary: the page at /graphiql and its assets (GraphiQL 4.1.2, React
// and ReactDOM 18.2.0, vendored from npm with their licences, see vendor.txt) under /graphiql/, so it works
// offline, air-gapped and behind strict proxies, and no visit is reported to a CDN.
package graphiql

import (
	"embed"
	"net/http"
	"path"
	"strings"

	"github.com/leaderboard/leaderboard/web"
)

//go:embed page.html page.js assets
var files embed.FS

// csp allows only this origin: scripts (the vendored ones and page.js, no inline script), styles (GraphiQL also
// sets inline styles), images and fonts (GraphiQL inlines some as data: URLs), and connections (HTTP and the
// websocket to /graphql).
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self' ws: wss:; worker-src 'self' blob:; frame-ancestors 'none'"

// Handler serves GET and HEAD of /graphiql (the page), /graphiql/page.js and /graphiql/assets/<file>; anything
// else under /graphiql/ is 404 (see web.ServeAssets).
func Handler() http.Handler {
	assets := map[string]*web.Asset{}
	add := func(urlPath, file string) {
		body, err := files.ReadFile(file)
		if err != nil {
			panic("graphiql: " + err.Error()) // cannot happen: the files are compiled in
		}
		ct := ""
		if strings.HasPrefix(path.Base(file), "LICENSE") {
			ct = "text/plain; charset=utf-8"
		}
		assets[urlPath] = web.NewAsset(file, body, ct)
	}
	add("/graphiql", "page.html")
	add("/graphiql/", "page.html")
	add("/graphiql/page.js", "page.js")
	entries, _ := files.ReadDir("assets")
	for _, e := range entries {
		add("/graphiql/assets/"+e.Name(), "assets/"+e.Name())
	}
	return web.ServeAssets(assets, func(*http.Request) string { return csp })
}
