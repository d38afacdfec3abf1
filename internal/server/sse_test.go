package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	event string
	data  string
}

// sseOpen starts an event stream: POST with a JSON body, or GET with the request in the URL (an EventSource).
func sseOpen(t *testing.T, ctx context.Context, s *testServer, method, key, query string, vars map[string]any) (*http.Response, <-chan sseEvent) {
	t.Helper()
	var req *http.Request
	if method == http.MethodPost {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		req, _ = http.NewRequestWithContext(ctx, method, s.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		v := url.Values{"query": {query}}
		if vars != nil {
			b, _ := json.Marshal(vars)
			v.Set("variables", string(b))
		}
		req, _ = http.NewRequestWithContext(ctx, method, s.URL+"/graphql?"+v.Encode(), nil)
	}
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan sseEvent, 64)
	if resp.StatusCode != http.StatusOK {
		// Not a stream: the caller reads the body itself (a reader here raced it and took the body first).
		close(events)
		return resp, events
	}
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp, events
}

func nextEvent(t *testing.T, events <-chan sseEvent, d time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
	}
	return sseEvent{}
}

// Queries and subscriptions over server-sent events, POST or GET (EventSource): the same payloads as over a
// websocket (the shared rendering), past REQUEST_TIMEOUT and WRITE_TIMEOUT, with the same auth, no mutations over
// GET, counted by MAX_CONNS_PER_ADDR, and ended (with a complete event) at shutdown.
func TestServerSentEvents(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	// Short, for the streams to outlive them, and long enough for the test's own requests on a loaded make test
	// (a submit at 300 ms timed out there).
	cfg.RequestTimeout, cfg.WriteTimeout = time.Second, 1500*time.Millisecond
	cfg.MaxConnsPerAddr = 3
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "sse"})
	// A name and metadata that encoding/json rewrites (HTML characters, U+2028, spaces): the websocket writes the
	// shared rendering as it is, the event stream marshals the response; both must be gqlgen's bytes.
	s.submit(t, map[string]any{"board": "sse", "playerId": "a", "score": 5, "displayName": "<Ann> & co\u2028",
		"metadata": map[string]any{"html": "<i>&</i>", "n": []int{1, 2}}})
	ctx := ctxT(t, 30*time.Second)
	sub := `subscription($b: ID!) { topUpdates(board: $b, first: 5) { version snapshot entries { playerId rank score displayName metadata } } }`
	vars := map[string]any{"b": "sse"}

	ws := wstest.Dial(t, s.WSURL, wstest.TransportWS, map[string]any{"authorization": "Bearer " + testReadKey})
	var open []*http.Response
	for k, method := range []string{http.MethodPost, http.MethodGet} {
		id := string(rune('1' + k))
		ws.Subscribe(id, sub, vars)
		m, err := ws.Next(ctx)
		for err == nil && m.ID != id { // updates of the earlier subscription
			m, err = ws.Next(ctx)
		}
		if err != nil {
			t.Fatalf("websocket: %v", err)
		}
		resp, events := sseOpen(t, ctx, s, method, testReadKey, sub, vars)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: status %d, content type %q", method, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		open = append(open, resp)
		first := nextEvent(t, events, 5*time.Second)
		if first.event != "next" || first.data != string(m.Payload) {
			t.Errorf("%s: first event %+v\nover a websocket: %s", method, first, m.Payload)
		}
		time.Sleep(cfg.WriteTimeout + 200*time.Millisecond) // past both timeouts: the stream must still be open
		s.submit(t, map[string]any{"board": "sse", "playerId": "b-" + method, "score": 9 + k})
		ev := nextEvent(t, events, 5*time.Second)
		if ev.event != "next" || !strings.Contains(ev.data, `"playerId":"b-`+method+`"`) {
			t.Errorf("%s: update after the timeouts: %+v", method, ev)
		}
	}
	// The two open streams and the websocket hold this address's 3 connections.
	if resp, _ := sseOpen(t, ctx, s, http.MethodPost, testReadKey, sub, vars); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a 4th stream from one address: status %d, want 429", resp.StatusCode)
	}
	for _, resp := range open {
		resp.Body.Close()
	}
	ws.Close()

	// A query: one next event, then complete (once the closed streams have given their slots back).
	var events <-chan sseEvent
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var resp *http.Response
		resp, events = sseOpen(t, ctx, s, http.MethodGet, testReadKey, `{ top(board: "sse", first: 1) { playerId } }`, nil)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed streams still hold their slots: %d", resp.StatusCode)
		}
	}
	if ev := nextEvent(t, events, 5*time.Second); ev.event != "next" || !strings.Contains(ev.data, `"top":[{"playerId":"b-GET"}]`) {
		t.Errorf("query over SSE: %+v", ev)
	}
	if ev := nextEvent(t, events, 5*time.Second); ev.event != "complete" {
		t.Errorf("after the query: %+v", ev)
	}
	// No key where a read key is required: the error, coded, in the stream.
	_, events = sseOpen(t, ctx, s, http.MethodPost, "", sub, vars)
	if ev := nextEvent(t, events, 5*time.Second); !strings.Contains(ev.data, `"code":"UNAUTHENTICATED"`) {
		t.Errorf("no key: %+v", ev)
	}
	// No mutations over GET; nothing applied.
	resp, _ := sseOpen(t, ctx, s, http.MethodGet, testSubmitKey,
		`mutation { submitScore(input: {board: "sse", playerId: "get", score: 1}) { updated } }`, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "BAD_USER_INPUT") {
		t.Errorf("mutation over GET: %d %s", resp.StatusCode, body)
	}
	if r := s.do(t, testReadKey, `{ rank(board: "sse", playerId: "get") { rank } }`, nil); string(r.Data) != `{"rank":null}` {
		t.Errorf("the GET mutation was applied: %s", r.Data)
	}

	// Shutdown ends the open streams with a complete event, well within SHUTDOWN_TIMEOUT.
	_, events = sseOpen(t, ctx, s, http.MethodPost, testReadKey, sub, vars)
	nextEvent(t, events, 5*time.Second)
	start := time.Now()
	s.Shutdown(t)
	if d := time.Since(start); d > cfg.ShutdownTimeout/2 {
		t.Errorf("shutdown took %v with open event streams", d)
	}
	sawComplete := false
	for ev := range events {
		sawComplete = sawComplete || ev.event == "complete"
	}
	if !sawComplete {
		t.Error("a stream ended at shutdown without a complete event")
	}
}

// An event stream carries ": ping" comments every WS_PING_INTERVAL while nothing else is sent, so proxies keep it.
func TestServerSentEventsKeepAlive(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.WSPingInterval = 200 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "ssealive"})
	body, _ := json.Marshal(map[string]any{"query": `subscription { topUpdates(board: "ssealive") { version } }`})
	req, _ := http.NewRequestWithContext(ctxT(t, 10*time.Second), http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	pings, start := 0, time.Now()
	for pings < 3 && sc.Scan() {
		if sc.Text() == ": ping" {
			pings++
		}
	}
	if pings < 3 {
		t.Fatalf("%d pings, stream ended: %v", pings, sc.Err())
	}
	if d := time.Since(start); d < 2*cfg.WSPingInterval {
		t.Errorf("3 pings within %v: more often than every %v", d, cfg.WSPingInterval)
	}
}
