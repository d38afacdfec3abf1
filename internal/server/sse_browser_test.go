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
// both see the snapshot and a live update. Then (issue 43) a bare EventSource sees complete, and closes on it,
// both after a query and after a subscription that deleteLeaderboard ends: each operation runs once (counted by the
// server's metrics). complete without a data line is never dispatched by an EventSource, which then reconnected
// every 3 s and ran the operation again, forever.
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

	// A query and a subscription that ends, each over a bare EventSource that closes on complete.
	// Counted by their NOT_FOUND answers: one each per run (gqlgen's response chain also counts a streamed
	// operation's end, as ok).
	const queryRuns = `lb_graphql_operations_total{field="top",outcome="NOT_FOUND",type="query"}`
	const subEnded = `lb_graphql_operations_total{field="topUpdates",outcome="NOT_FOUND",type="subscription"}`
	s.create(t, map[string]any{"id": "ssegone"})
	queriesBefore, endsBefore := s.metric(t, queryRuns), s.metric(t, subEnded)
	p.eval(`(() => {
		window.ended = {};
		for (const [name, op] of [["query", `+strconv.Quote(`{ top(board: "nosuchboard") { playerId } }`)+`],
				["subscription", `+strconv.Quote(`subscription { topUpdates(board: "ssegone") { version } }`)+`]]) {
			const run = window.ended[name] = { next: [], complete: 0, readyState: -1 };
			const es = new EventSource("/graphql?query=" + encodeURIComponent(op));
			es.addEventListener("next", (e) => run.next.push(e.data));
			es.addEventListener("complete", () => { run.complete++; es.close(); run.readyState = es.readyState; });
		}
		return true;
	})()`, nil)
	type ended struct {
		Next       []string
		Complete   int
		ReadyState int
	}
	var runs map[string]ended
	p.waitFor(10*time.Second, "the subscription's snapshot", func() bool {
		p.eval("window.ended", &runs)
		return len(runs["subscription"].Next) > 0
	})
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "ssegone"}, nil)
	for _, name := range []string{"query", "subscription"} {
		p.waitFor(10*time.Second, name+": complete", func() bool {
			p.eval("window.ended", &runs)
			return runs[name].Complete > 0
		})
	}
	// Closed on complete (EventSource.CLOSED): the browser never reconnects, and each ran once.
	qr, sr := runs["query"], runs["subscription"]
	if qr.Complete != 1 || qr.ReadyState != 2 || len(qr.Next) != 1 || !strings.Contains(qr.Next[0], `"code":"NOT_FOUND"`) {
		t.Errorf("the query: %+v", qr)
	}
	if sr.Complete != 1 || sr.ReadyState != 2 || len(sr.Next) != 2 || !strings.Contains(sr.Next[1], `"code":"NOT_FOUND"`) {
		t.Errorf("the subscription: %+v", sr)
	}
	if n := s.metric(t, queryRuns) - queriesBefore; n != 1 {
		t.Errorf("the query ran %v times", n)
	}
	if n := s.metric(t, subEnded) - endsBefore; n != 1 {
		t.Errorf("the subscription ended %v times", n)
	}
}
