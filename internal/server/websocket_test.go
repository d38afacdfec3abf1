package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// TestWebsocketSubscriptions runs topUpdates and rankUpdates over both subprotocols.
func TestWebsocketSubscriptions(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "live"})
	s.submit(t, map[string]any{"board": "live", "playerId": "a", "score": 10})

	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		t.Run(proto, func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			c := wstest.Dial(t, s.WSURL, proto, nil)
			if c.Subprotocol() != proto {
				t.Fatalf("negotiated %q", c.Subprotocol())
			}
			if err := c.Subscribe("top", `subscription { topUpdates(board: "live", first: 5) {
				board window period version snapshot size removed entries { playerId rank score } } }`, nil); err != nil {
				t.Fatal(err)
			}
			type update struct {
				TopUpdates struct {
					Board, Window, Period string
					Version, Size         int
					Snapshot              bool
					Removed               []string
					Entries               []entry
				}
			}
			var u update
			c.NextData(t, ctx, "top", &u)
			if !u.TopUpdates.Snapshot || u.TopUpdates.Board != "live" || u.TopUpdates.Window != "ALL_TIME" ||
				u.TopUpdates.Period != "all" || len(u.TopUpdates.Entries) == 0 {
				t.Fatalf("first update must be a snapshot: %+v", u)
			}
			player := "p-" + proto
			if err := c.Subscribe("rank", `subscription($p: ID!) { rankUpdates(board: "live", playerId: $p) { playerId rank score } }`,
				map[string]any{"p": player}); err != nil {
				t.Fatal(err)
			}
			// A player without a score starts with rank 0 ("no score"), then gets their entry when they score.
			// (Both protocols' players score 1000 on the same board: the second ranks behind the first.)
			s.submit(t, map[string]any{"board": "live", "playerId": player, "score": 1000})
			// The rank update and the top list's diff may arrive in either order.
			var r struct{ RankUpdates entry }
			var diff update
			for r.RankUpdates.Rank == 0 || diff.TopUpdates.Version == 0 {
				m, err := c.Next(ctx)
				if err != nil {
					t.Fatalf("waiting for the rank update and the diff: %v", err)
				}
				res, err := m.Result()
				if !m.IsData() || err != nil || len(res.Errors) > 0 {
					t.Fatalf("unexpected message %s %s", m.Type, m.Payload)
				}
				switch m.ID {
				case "rank":
					err = json.Unmarshal(res.Data, &r)
				case "top":
					err = json.Unmarshal(res.Data, &diff)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if r.RankUpdates.Rank < 1 || r.RankUpdates.Score != 1000 || r.RankUpdates.PlayerID != player {
				t.Fatalf("rank update %+v", r)
			}
			if diff.TopUpdates.Snapshot || diff.TopUpdates.Version <= u.TopUpdates.Version {
				t.Fatalf("diff %+v after %+v", diff, u)
			}
			if err := c.Stop("top"); err != nil {
				t.Fatal(err)
			}
			// The subscription ends with complete.
			for {
				m, err := c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.ID == "top" && m.Type == "complete" {
					break
				}
			}
			s.must(t, testAdminKey, `mutation($p: ID!) { removePlayer(board: "live", playerId: $p) }`, map[string]any{"p": player}, nil)
			var gone struct{ RankUpdates entry }
			nextFor(t, ctx, c, "rank", &gone)
			if gone.RankUpdates.Rank != 0 {
				t.Fatalf("a removed player's update has rank 0: %+v", gone)
			}
		})
	}
}

// nextFor waits for the next data message of id, skipping those of other operations.
func nextFor(t *testing.T, ctx context.Context, c *wstest.Conn, id string, v any) {
	t.Helper()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v", id, err)
		}
		if m.ID != id {
			continue
		}
		if !m.IsData() {
			t.Fatalf("want data for %q, got %s %s", id, m.Type, m.Payload)
		}
		r, err := m.Result()
		if err != nil || len(r.Errors) > 0 {
			t.Fatalf("data for %q: %s", id, m.Payload)
		}
		if err := json.Unmarshal(r.Data, v); err != nil {
			t.Fatal(err)
		}
		return
	}
}

func TestWebsocketAuthAndLimits(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.APIKeys += ",read:" + testReadKey
	cfg.MaxSubscriptionsPerConn = 2
	cfg.MaxConnsPerAddr = 3
	cfg.MaxWSMessageBytes = 2048
	cfg.CORSOrigins = []string{"https://good.example"}
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "ws"})
	ctx := ctxT(t, 20*time.Second)

	t.Run("keys", func(t *testing.T) {
		for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
			for _, payload := range []map[string]any{nil, {"authorization": "Bearer wrong"}} {
				c, _, err := wstest.DialContext(ctx, s.WSURL, proto, nil, payload)
				if err == nil {
					c.Close()
					t.Fatalf("%s with %v: connection accepted although a read key is required", proto, payload)
				}
				if proto == wstest.TransportWS && wstest.CloseCode(err) != 4403 {
					t.Errorf("%s: want close 4403, got %v", proto, err)
				}
				if proto == wstest.LegacyWS && !strings.Contains(err.Error(), "UNAUTHENTICATED") {
					t.Errorf("%s: want connection_error UNAUTHENTICATED, got %v", proto, err)
				}
			}
		}
		c := wstest.Dial(t, s.WSURL, wstest.TransportWS, map[string]any{"authorization": "Bearer " + testReadKey})
		c.Subscribe("1", `subscription { topUpdates(board: "ws") { version } }`, nil)
		c.NextData(t, ctx, "1", nil)
		c.Close()
	})

	auth := map[string]any{"authorization": "Bearer " + testReadKey}
	t.Run("subscriptions per connection", func(t *testing.T) {
		c := wstest.Dial(t, s.WSURL, wstest.TransportWS, auth)
		for i := 1; i <= 3; i++ {
			c.Subscribe(fmt.Sprint(i), `subscription { topUpdates(board: "ws") { version } }`, nil)
		}
		got := map[string]string{}
		for len(got) < 3 {
			m, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, seen := got[m.ID]; seen {
				continue
			}
			code := "ok"
			if errs := m.Errors(); len(errs) > 0 {
				code = errs[0].Code()
			}
			got[m.ID] = code
		}
		// gqlgen starts subscriptions concurrently, so any one of the three may be the one refused.
		limited, okID := 0, ""
		for id, code := range got {
			switch code {
			case "RATE_LIMITED":
				limited++
			case "ok":
				okID = id
			}
		}
		if limited != 1 || okID == "" {
			t.Fatalf("want two subscriptions and one RATE_LIMITED, got %v", got)
		}
		// Stopping one frees its slot.
		c.Stop(okID)
		deadline := time.Now().Add(5 * time.Second)
		for {
			c.Subscribe("4", `subscription { topUpdates(board: "ws") { version } }`, nil)
			m, err := c.Next(ctx)
			for err == nil && m.ID != "4" {
				m, err = c.Next(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.IsData() && len(m.Errors()) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("slot not released: %s %s", m.Type, m.Payload)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	})

	t.Run("errors", func(t *testing.T) {
		c := wstest.Dial(t, s.WSURL, wstest.TransportWS, auth)
		c.Subscribe("nf", `subscription { topUpdates(board: "nope") { version } }`, nil)
		c.Subscribe("big", `subscription { topUpdates(board: "ws", first: 101) { version } }`, nil)
		want := map[string]string{"nf": "NOT_FOUND", "big": "BAD_USER_INPUT"}
		for len(want) > 0 {
			m, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if code, ok := want[m.ID]; ok {
				errs := m.Errors()
				if len(errs) == 0 || errs[0].Code() != code {
					t.Errorf("%s: want %s, got %s %s", m.ID, code, m.Type, m.Payload)
				}
				delete(want, m.ID)
			}
		}
		// A message over MAX_WS_MESSAGE_BYTES ends the connection.
		c.SendRaw([]byte(`{"type":"subscribe","id":"x","payload":{"query":"` + strings.Repeat(" ", 4096) + `"}}`))
		for {
			if _, err := c.Next(ctx); err != nil {
				if ctx.Err() != nil {
					t.Fatal("an oversized message must end the connection")
				}
				break
			}
		}
	})

	t.Run("origin", func(t *testing.T) {
		for origin, ok := range map[string]bool{"https://good.example": true, "https://evil.example": false,
			"http://" + strings.TrimPrefix(s.URL, "http://"): true} {
			c, resp, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, http.Header{"Origin": {origin}}, auth)
			if ok != (err == nil) {
				t.Errorf("origin %s: want allowed %v, got %v", origin, ok, err)
			}
			if err == nil {
				c.Close()
			} else if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("origin %s: want 403, got %v", origin, resp)
			}
		}
	})

	t.Run("connections per address", func(t *testing.T) {
		// Connections of the earlier subtests free their slots asynchronously, once the server sees them close.
		var conns []*wstest.Conn
		deadline := time.Now().Add(5 * time.Second)
		for len(conns) < 3 {
			c, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, auth)
			if err == nil {
				conns = append(conns, c)
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("connection %d: %v", len(conns)+1, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		defer func() {
			for _, c := range conns[1:] {
				c.Close()
			}
		}()
		_, resp, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, auth)
		if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("4th connection: want 429, got %v %v", resp, err)
		}
		conns[0].Close()
		deadline = time.Now().Add(5 * time.Second)
		for {
			c, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, nil, auth)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a closed connection must free its slot: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestGracefulShutdown closes open websockets with a going-away frame and returns promptly.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "bye"})
	ctx := ctxT(t, 20*time.Second)
	var conns []*wstest.Conn
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		c := wstest.Dial(t, s.WSURL, proto, nil)
		c.Subscribe("1", `subscription { topUpdates(board: "bye") { version } }`, nil)
		c.NextData(t, ctx, "1", nil)
		conns = append(conns, c)
	}
	start := time.Now()
	s.Shutdown(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	for _, c := range conns {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("websocket still open after shutdown")
		}
		for {
			_, err := c.Next(ctx)
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != "server shutting down" {
					t.Errorf("want close 1001 (going away) \"server shutting down\", got %v", err)
				}
				break
			}
		}
	}
	if _, err := http.Get(s.URL + "/healthz"); err == nil {
		t.Error("server still accepting after shutdown")
	}
}

// TestGracefulShutdownLinger: shutdown waits for the peers' close frames, up to one gqlstream.CloseLinger shared by all
// connections (not one per connection), closes each connection as soon as its peer has answered, and every peer
// gets the going-away frame, also one that answers late and one that never answers.
func TestGracefulShutdownLinger(t *testing.T) {
	t.Parallel()
	dialN := func(s *testServer, n int) []*websocket.Conn {
		var conns []*websocket.Conn
		for i := range n {
			ws := wsDial(t, s, []string{wstest.TransportWS, wstest.LegacyWS}[i%2])
			wsInit(t, ws)
			conns = append(conns, ws)
		}
		return conns
	}
	shutdown := func(s *testServer) time.Duration {
		start := time.Now()
		s.Shutdown(t)
		return time.Since(start)
	}
	t.Run("late peers", func(t *testing.T) {
		t.Parallel()
		// They start reading (and so answer the close frame: gorilla's default close handler) after late.
		const late = 200 * time.Millisecond
		s := startServer(t, testConfig(t))
		conns := dialN(s, 4)
		answered := make(chan error, len(conns))
		for _, ws := range conns {
			go func() {
				time.Sleep(late)
				answered <- wantGoingAway(ws)
			}()
		}
		d := shutdown(s)
		t.Logf("shutdown took %v", d.Round(time.Millisecond))
		if d < late {
			t.Errorf("shutdown took %v: it did not wait for the peers that answer after %v", d, late)
		}
		if d >= gqlstream.CloseLinger*9/10 {
			t.Errorf("shutdown took %v: the connections were not closed when their peers answered (after %v)", d, late)
		}
		for range conns {
			if err := <-answered; err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("silent peers", func(t *testing.T) {
		t.Parallel()
		// They read only after shutdown: one gqlstream.CloseLinger each would be 4 s.
		s := startServer(t, testConfig(t))
		conns := dialN(s, 4)
		d := shutdown(s)
		t.Logf("shutdown took %v", d.Round(time.Millisecond))
		if d > gqlstream.CloseLinger+time.Second {
			t.Errorf("shutdown took %v with %d peers that never answer: the linger (%v) is not shared",
				d, len(conns), gqlstream.CloseLinger)
		}
		for _, ws := range conns {
			if err := wantGoingAway(ws); err != nil {
				t.Error(err)
			}
		}
	})
}

// wantGoingAway reads ws until its close frame, which must be 1001 (going away).
func wantGoingAway(ws *websocket.Conn) error {
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue // messages (pings) sent before the close
		}
		if websocket.IsCloseError(err, websocket.CloseGoingAway) {
			return nil
		}
		return fmt.Errorf("want close 1001 (going away), got %v", err)
	}
}
