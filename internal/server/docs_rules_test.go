package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// README ("Errors"): a document that does not parse or validate is a 422 for JSON clients and a 400 for clients
// that accept application/graphql-response+json (GraphQL over HTTP); an undecodable body is a 400 either way.
func TestDocumentErrorStatuses(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	for _, c := range []struct {
		body   string
		accept string
		status int
	}{
		{`{"query":"{ nosuchfield }"}`, "", 422},
		{`{"query":"{ nosuchfield }"}`, "application/json", 422},
		{`{"query":"{ nosuchfield }"}`, "application/graphql-response+json", 400},
		{`{"query":"{ top(board: "}`, "", 422},
		{`{"query":"{ top(board: "}`, "application/graphql-response+json", 400},
		{`not json`, "", 400},
		{`not json`, "application/graphql-response+json", 400},
	} {
		req := s.request("", []byte(c.body))
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		r := doRequest(t, req)
		if r.Status != c.status || len(r.Errors) == 0 || r.Errors[0].Code() != codeInvalid {
			t.Errorf("%s with Accept %q: status %d, errors %+v; want %d BAD_USER_INPUT", c.body, c.accept, r.Status,
				r.Errors, c.status)
		}
	}
}

// README ("Routes"): a websocket's key is the connection_init payload's "authorization", else the upgrade
// request's Authorization header; an Apollo-style {"headers": {...}} payload is not read; a missing or unknown key
// where one is needed closes with 4403.
func TestWebsocketKeySources(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "wskeys"})
	ctx := ctxT(t, 20*time.Second)
	bearer := http.Header{"Authorization": {"Bearer " + testReadKey}}
	for _, c := range []struct {
		name    string
		header  http.Header
		payload any
		ok      bool
	}{
		{"payload", nil, map[string]any{"authorization": "Bearer " + testReadKey}, true},
		{"upgrade header", bearer, nil, true},
		{"payload wins over the header", bearer, map[string]any{"authorization": "Bearer wrong"}, false},
		{"headers object is not read", nil, map[string]any{"headers": map[string]any{"Authorization": "Bearer " + testReadKey}}, false},
		{"no key", nil, nil, false},
	} {
		conn, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, c.header, c.payload)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			conn.Subscribe("1", `subscription { topUpdates(board: "wskeys") { version } }`, nil)
			if m, err := conn.Next(ctx); err != nil || m.Type != "next" {
				t.Errorf("%s: %+v %v", c.name, m, err)
			}
			conn.Close()
		} else if err == nil || wstest.CloseCode(err) != 4403 {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("%s: want close 4403, got %v", c.name, err)
		}
	}
}

// README (tour, step 5, and "exactTop"): a period that is closed and gone, or not started, answers an empty list
// (no error); on an exactTop board `top` lists only the exact tier and `aroundMe` of a tail player returns that
// player alone, with an estimated rank.
func TestPeriodsAndExactTierAnswers(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "tiers", "windows": []string{"ALL_TIME", "DAILY"}, "exactTop": 2})
	for i, p := range []string{"a", "b", "c", "d"} {
		s.submit(t, map[string]any{"board": "tiers", "playerId": p, "score": 100 - 10*i})
	}
	var out struct {
		Old, Future []struct{ PlayerID string }
		Top         []struct{ PlayerID string }
		Around      []struct {
			PlayerID    string
			Approximate bool
		}
	}
	s.must(t, "", `{
		old: top(board: "tiers", window: DAILY, period: "2000-01-01") { playerId }
		future: top(board: "tiers", window: DAILY, period: "2999-12-31") { playerId }
		top: top(board: "tiers", first: 10) { playerId }
		around: aroundMe(board: "tiers", playerId: "d", radius: 2) { playerId approximate }
	}`, nil, &out)
	if len(out.Old) != 0 || len(out.Future) != 0 {
		t.Errorf("closed and future periods: %+v %+v, want empty lists", out.Old, out.Future)
	}
	if len(out.Top) != 2 || out.Top[0].PlayerID != "a" || out.Top[1].PlayerID != "b" {
		t.Errorf("top of an exactTop-2 board: %+v, want a and b", out.Top)
	}
	if len(out.Around) != 1 || out.Around[0].PlayerID != "d" || !out.Around[0].Approximate {
		t.Errorf("aroundMe of a tail player: %+v, want d alone, approximate", out.Around)
	}
}
