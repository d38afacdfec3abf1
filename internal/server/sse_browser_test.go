package server

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Server-sent events from a browser, with clients nobody here wrote: graphql-sse's own client (npm graphql-sse
// 2.6.1, testdata/graphql-sse) subscribing over POST with an Authorization header, and a bare EventSource over GET;
// both see the snapshot and a live update.
func TestServerSentEventsInABrowser(t *testing.T) {
	lib, err := os.ReadFile("testdata/graphql-sse/graphql-sse.min.js")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "ssebrowser"})
	s.submit(t, map[string]any{"board": "ssebrowser", "playerId": "ann", "score": 1})
	p := page{t: t, ctx: newBrowser(t)}
	p.run(chromedp.Navigate(s.URL + "/healthz")) // this origin, so no CORS is involved
	p.eval(string(lib)+";typeof graphqlSse.createClient", nil)
	sub := `subscription { topUpdates(board: "ssebrowser") { version entries { playerId } } }`
	p.eval(`(() => {
		window.viaClient = []; window.viaEventSource = []; window.errors = [];
		const client = graphqlSse.createClient({ url: "/graphql",
			headers: { Authorization: "Bearer `+testSubmitKey+`" } });
		client.subscribe({ query: `+strconv.Quote(sub)+` }, {
			next: (v) => window.viaClient.push(JSON.stringify(v)),
			error: (e) => window.errors.push(String(e)),
			complete: () => {},
		});
		const es = new EventSource("/graphql?query=" + encodeURIComponent(`+strconv.Quote(sub)+`));
		es.addEventListener("next", (e) => window.viaEventSource.push(e.data));
		es.onerror = (e) => window.errors.push("EventSource error, readyState " + es.readyState);
		return true;
	})()`, nil)
	seen := func(list, what string) func() bool {
		return func() bool {
			var got []string
			p.eval("window."+list, &got)
			for _, m := range got {
				if strings.Contains(m, what) {
					return true
				}
			}
			return false
		}
	}
	for _, list := range []string{"viaClient", "viaEventSource"} {
		p.waitFor(10*time.Second, list+": the snapshot", seen(list, `"playerId":"ann"`))
	}
	s.submit(t, map[string]any{"board": "ssebrowser", "playerId": "bob", "score": 2})
	for _, list := range []string{"viaClient", "viaEventSource"} {
		p.waitFor(10*time.Second, list+": the update", seen(list, `"playerId":"bob"`))
	}
	var errs []string
	p.eval("window.errors", &errs)
	if len(errs) > 0 {
		t.Errorf("errors in the page: %v", errs)
	}
}
