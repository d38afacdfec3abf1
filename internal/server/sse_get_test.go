package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// getRaw sends a GET /graphql with the URL parameters params and the Accept header (none when empty), and returns
// the answer whole (a stream's too: a query's stream ends after complete).
func getRaw(t *testing.T, s *testServer, key string, params url.Values, accept string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t, 20*time.Second), http.MethodGet, s.URL+"/graphql?"+params.Encode(), nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// Issue 43: no mutation runs from a GET, whatever carries its document. A mutation's persisted hash (registered by
// a POST, as automatic persisted queries do) sent over GET without its text ran on every GET that asked for an
// event stream: the stream checked the query parameter only. Every such GET, plain or event stream, is a 405
// with Allow: POST and BAD_USER_INPUT, and changes nothing (read back through a store of the test's own); GraphQL
// over HTTP's 405 is also what a plain GET mutation gets (gqlgen's GET transport answered 406). A GET carries one
// request: a repeated query parameter runs only the first one, and there are no GET batches.
func TestSSEGETNeverRunsAMutation(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "getmut", "mode": "SUM"})
	mutation := `mutation { submitScore(input: {board: "getmut", playerId: "ann", score: 1}) { updated } }`
	score := func() float64 {
		t.Helper()
		e, err := s.Store.Rank(context.Background(), leaderboard.View{Board: "getmut"}, "ann")
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return 0
		}
		return e.Score
	}
	// Registered and run once by a POST with its hash.
	sum := sha256.Sum256([]byte(mutation))
	ext, _ := json.Marshal(map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}})
	body, _ := json.Marshal(map[string]any{"query": mutation, "extensions": json.RawMessage(ext)})
	if r := s.post(t, testSubmitKey, body); len(r.Errors) > 0 {
		t.Fatalf("registering the persisted mutation: %+v", r.Errors)
	}
	if got := score(); got != 1 {
		t.Fatalf("after the POST: score %v, want 1", got)
	}
	both := `query Q { leaderboard(id: "getmut") { id } } ` + strings.TrimPrefix(mutation, "mutation")
	both = strings.Replace(both, "{ submitScore", "mutation M { submitScore", 1)
	for _, c := range []struct {
		name   string
		params url.Values
	}{
		{"persisted hash", url.Values{"extensions": {string(ext)}}},
		{"query text", url.Values{"query": {mutation}}},
		{"named in a document with a query", url.Values{"query": {both}, "operationName": {"M"}}},
		{"the first of two query parameters", url.Values{"query": {mutation, `{ leaderboard(id: "getmut") { id } }`}}},
	} {
		for _, accept := range []string{"text/event-stream", "", "application/json"} {
			resp, body := getRaw(t, s, testSubmitKey, c.params, accept)
			var r gqlResponse
			_ = json.Unmarshal(body, &r)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost ||
				len(r.Errors) != 1 || r.Errors[0].Code() != codeInvalid {
				t.Errorf("%s, Accept %q: %d, Allow %q, %s; want 405, Allow: POST, BAD_USER_INPUT", c.name, accept,
					resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		}
	}
	if got := score(); got != 1 {
		t.Errorf("after the GETs: score %v, want 1 (a GET ran the mutation)", got)
	}
	// The query of the same document, and the first of two query parameters, run.
	for _, params := range []url.Values{
		{"query": {both}, "operationName": {"Q"}},
		{"query": {`{ leaderboard(id: "getmut") { id } }`, mutation}},
	} {
		resp, body := getRaw(t, s, "", params, "")
		if resp.StatusCode != http.StatusOK || string(body) != `{"data":{"leaderboard":{"id":"getmut"}}}` {
			t.Errorf("%v: %d %s", params, resp.StatusCode, body)
		}
	}
	// A subscription over a plain GET is still gqlgen's 406: it needs an Accept that takes an event stream.
	resp, body := getRaw(t, s, "", url.Values{"query": {`subscription { topUpdates(board: "getmut") { version } }`}}, "")
	if resp.StatusCode != http.StatusNotAcceptable || !strings.Contains(string(body), codeInvalid) {
		t.Errorf("a subscription over a plain GET: %d %s", resp.StatusCode, body)
	}
}

// Issue 43: the transport is chosen by the Accept header's preferences, not by a substring of it: urql's default
// Accept (JSON first, then text/event-stream), a q=0 stream or JSON listed first get JSON, the bytes a request
// without Accept gets; a stream listed first or preferred by quality gets an event stream, whose one event carries
// those bytes. GET and POST alike.
func TestSSEAcceptNegotiation(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "accept"})
	s.submit(t, map[string]any{"board": "accept", "playerId": "ann", "score": 3})
	query := `{ top(board: "accept") { playerId score } }`
	const urql = "application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed"
	post := func(accept string) (*http.Response, []byte) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query})
		req, _ := http.NewRequestWithContext(ctxT(t, 20*time.Second), http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	get := func(accept string) (*http.Response, []byte) {
		return getRaw(t, s, "", url.Values{"query": {query}}, accept)
	}
	for method, do := range map[string]func(string) (*http.Response, []byte){"POST": post, "GET": get} {
		_, plain := do("")
		if !strings.Contains(string(plain), `"playerId":"ann"`) {
			t.Fatalf("%s without Accept: %s", method, plain)
		}
		for _, c := range []struct {
			accept      string
			stream      bool
			contentType string // of a JSON answer
		}{
			{urql, false, "application/graphql-response+json"},
			{"text/event-stream;q=0", false, "application/graphql-response+json"},
			{"application/json, text/event-stream", false, "application/json"},
			{"*/*, text/event-stream", false, "application/json"},
			{"text/event-stream;q=0.5, application/json", false, "application/json"},
			{"text/event-stream", true, ""},
			{"text/event-stream, application/json", true, ""},
			{"application/json;q=0.9, text/event-stream", true, ""},
		} {
			resp, body := do(c.accept)
			ct := resp.Header.Get("Content-Type")
			if !c.stream {
				if resp.StatusCode != http.StatusOK || ct != c.contentType || string(body) != string(plain) {
					t.Errorf("%s, Accept %q: %d %s %s; want %s %s", method, c.accept, resp.StatusCode, ct, body, c.contentType, plain)
				}
				continue
			}
			want := ":\n\nevent: next\ndata: " + string(plain) + "\n\nevent: complete\ndata:\n\n"
			if resp.StatusCode != http.StatusOK || ct != "text/event-stream" || string(body) != want {
				t.Errorf("%s, Accept %q: %d %s %q; want an event stream %q", method, c.accept, resp.StatusCode, ct, body, want)
			}
		}
	}
}

// README: an event stream is not cut by READ_TIMEOUT, which bounds reading a request (net/http clears the read
// deadline for its background read of the connection, which ends the request when the client leaves).
func TestSSEOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReadTimeout = 300 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "readto"})
	ctx := ctxT(t, 20*time.Second)
	sub := `subscription { topUpdates(board: "readto") { entries { playerId } } }`
	var streams []<-chan sseEvent
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		_, events := sseOpen(t, ctx, s, method, "", sub, nil)
		if ev := nextEvent(t, events, 5*time.Second); ev.event != "next" {
			t.Fatalf("%s: first event %+v", method, ev)
		}
		streams = append(streams, events)
	}
	time.Sleep(3 * cfg.ReadTimeout) // well past the read deadline the requests had
	s.submit(t, map[string]any{"board": "readto", "playerId": "late", "score": 1})
	for i, events := range streams {
		if ev := nextEvent(t, events, 5*time.Second); ev.event != "next" || !strings.Contains(ev.data, `"late"`) {
			t.Errorf("stream %d after READ_TIMEOUT: %+v", i, ev)
		}
	}
}
