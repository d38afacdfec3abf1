package server

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// GraphiQL in headless Chromium, offline: every request the page makes goes to this server (nothing from a CDN)
// and none fails (no 404, favicon included), a query from the URL runs, and a subscription (graphql-ws on the
// same origin, authenticated with the key from the URL fragment) shows live updates.
func TestGraphiQLOffline(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey // a read key is required: the fragment's key must reach HTTP and ws
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "gq"})
	s.submit(t, map[string]any{"board": "gq", "playerId": "ann", "score": 10})

	ctx := newBrowser(t)
	var mu sync.Mutex
	var requests, failures, exceptions []string
	chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				failures = append(failures, e.Response.URL)
			}
		case *network.EventLoadingFailed:
			failures = append(failures, string(e.RequestID)+": "+e.ErrorText)
		case *network.EventWebSocketCreated:
			requests = append(requests, e.URL)
		case *runtime.EventExceptionThrown:
			exceptions = append(exceptions, e.ExceptionDetails.Text+" "+exceptionText(e.ExceptionDetails))
		}
	})
	p := page{t: t, ctx: ctx}
	response := func() string {
		var s string
		p.eval(`document.querySelector(".graphiql-response")?.innerText ?? ""`, &s)
		return s
	}
	open := func(query string) {
		p.run(chromedp.Navigate(s.URL + "/graphiql?query=" + url.QueryEscape(query) + "#key=" + testReadKey))
		p.run(chromedp.WaitVisible(chromedp.CSS(".graphiql-execute-button")))
		p.run(chromedp.Click(chromedp.CSS(".graphiql-execute-button")))
	}

	open(`{ top(board: "gq") { playerId score } }`)
	p.waitFor(10*time.Second, "the query's result", func() bool { return strings.Contains(response(), `"ann"`) })

	// A query typed into the editor (GraphiQL closes brackets and quotes as they are typed, and types over them).
	p.run(chromedp.Navigate(s.URL + "/graphiql#key=" + testReadKey))
	p.run(chromedp.WaitVisible(chromedp.CSS(".graphiql-query-editor .CodeMirror")))
	p.run(chromedp.Click(chromedp.CSS(".graphiql-query-editor .CodeMirror-lines")))
	p.eval(`document.querySelector(".graphiql-query-editor .CodeMirror").CodeMirror.setValue(""); true`, nil)
	p.run(chromedp.KeyEvent(`{ leaderboards { id size } }`))
	p.run(chromedp.Click(chromedp.CSS(".graphiql-execute-button")))
	p.waitFor(10*time.Second, "the typed query's result", func() bool { return strings.Contains(response(), `"gq"`) })

	open(`subscription { topUpdates(board: "gq") { version entries { playerId score } } }`)
	p.waitFor(10*time.Second, "the subscription's snapshot", func() bool { return strings.Contains(response(), `"version": 1`) })
	s.submit(t, map[string]any{"board": "gq", "playerId": "bob", "score": 20})
	p.waitFor(10*time.Second, "the live update", func() bool { return strings.Contains(response(), `"bob"`) })

	mu.Lock()
	defer mu.Unlock()
	host := strings.TrimPrefix(s.URL, "http://")
	for _, u := range requests {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme == "data" || pu.Scheme == "blob" {
			continue
		}
		if pu.Host != host {
			t.Errorf("the page loaded %s: not from this server", u)
		}
	}
	if len(failures) > 0 {
		t.Errorf("failed requests: %v", failures)
	}
	if len(exceptions) > 0 {
		t.Errorf("page exceptions: %v", exceptions)
	}
	if len(requests) < 5 {
		t.Errorf("only %d requests seen: %v", len(requests), requests)
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}
