package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// Liveness is websocket (RFC 6455) pings, which every websocket library answers by itself: a client that ignores
// graphql-transport-ws ping messages (genqlient) stays connected and keeps getting updates, with or without
// WS_PROTOCOL_PINGS; a peer that answers no websocket ping is dropped after two intervals, on both protocols.
func TestLivenessPings(t *testing.T) {
	t.Parallel()
	// 1 s: the drop deadline (two intervals) must hold through a loaded make test, where a pong can be late.
	const every = time.Second
	for _, protoPings := range []bool{false, true} {
		cfg := testConfig(t)
		cfg.WSPingInterval = every
		cfg.WSProtocolPings = protoPings
		s := startServer(t, cfg)
		s.create(t, map[string]any{"id": "alive"})

		// A graphql-transport-ws client that never sends a pong message; gorilla answers websocket pings.
		ws := wsDial(t, s, wstest.TransportWS)
		wsSend(t, ws, `{"type":"connection_init"}`)
		if m, err := wsRead(ws, 5*time.Second); err != nil || m.Type != "connection_ack" {
			t.Fatalf("ack: %+v %v", m, err)
		}
		wsSend(t, ws, `{"id":"1","type":"subscribe","payload":{"query":"subscription { topUpdates(board: \"alive\") { version } }"}}`)
		if m, err := wsRead(ws, 5*time.Second); err != nil || m.Type != "next" {
			t.Fatalf("first update: %+v %v", m, err)
		}
		// Read everything, counting protocol pings, for 4 intervals (twice the drop deadline); then a change
		// must still reach the subscription.
		type read struct {
			typ string
			err error
		}
		reads := make(chan read, 64)
		go func() {
			for {
				_, data, err := ws.ReadMessage()
				var m struct{ Type string }
				if err == nil {
					err = json.Unmarshal(data, &m)
				}
				reads <- read{m.Type, err}
				if err != nil {
					return
				}
			}
		}()
		protocolPings := 0
		quiet := time.After(4 * every)
	wait:
		for {
			select {
			case r := <-reads:
				if r.err != nil {
					t.Fatalf("protocol pings %v: the connection ended: %v", protoPings, r.err)
				}
				if r.typ == "ping" {
					protocolPings++
				}
			case <-quiet:
				break wait
			}
		}
		if protoPings != (protocolPings > 0) {
			t.Errorf("WS_PROTOCOL_PINGS %v: %d protocol pings in %v", protoPings, protocolPings, 4*every)
		}
		s.submit(t, map[string]any{"board": "alive", "playerId": "p", "score": 1})
		for deadline := time.After(10 * time.Second); ; {
			select {
			case r := <-reads:
				if r.err != nil {
					t.Fatalf("protocol pings %v: the connection ended: %v", protoPings, r.err)
				}
				if r.typ != "next" {
					continue
				}
			case <-deadline:
				t.Fatalf("protocol pings %v: no update after %v of ignored protocol pings", protoPings, 4*every)
			}
			break
		}
		ws.Close()

		for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
			mute := wsDial(t, s, proto)
			mute.SetPingHandler(func(string) error { return nil }) // reads, but answers no websocket ping
			wsSend(t, mute, `{"type":"connection_init"}`)
			start := time.Now()
			mute.SetReadDeadline(time.Now().Add(10 * time.Second))
			var err error
			for err == nil {
				_, _, err = mute.ReadMessage()
			}
			d := time.Since(start)
			if _, timeout := err.(interface{ Timeout() bool }); timeout && d >= 10*time.Second {
				t.Errorf("%s: a peer that answers no ping was not dropped in 10 s", proto)
			} else if d < 2*every-every/4 {
				t.Errorf("%s: dropped after %v, before two ping intervals (%v): %v", proto, d, 2*every, err)
			}
			mute.Close()
		}
	}
}

// graphql-ws clients get a "ka" message right after connection_ack and then every WS_PING_INTERVAL, as gqlgen's
// transport sent them (the websocket pings' round sends them, not a goroutine per connection).
func TestLegacyKeepAlive(t *testing.T) {
	t.Parallel()
	const every = 300 * time.Millisecond
	cfg := testConfig(t)
	cfg.WSPingInterval = every
	s := startServer(t, cfg)
	ws := wsDial(t, s, wstest.LegacyWS)
	wsSend(t, ws, `{"type":"connection_init"}`)
	for i, want := range []string{"connection_ack", "ka"} {
		if m, err := wsRead(ws, 5*time.Second); err != nil || m.Type != want {
			t.Fatalf("message %d: %+v %v, want %s", i, m, err, want)
		}
	}
	start := time.Now()
	for i := range 3 {
		m, err := wsRead(ws, 10*every)
		if err != nil || m.Type != "ka" {
			t.Fatalf("keep-alive %d: %+v %v", i, m, err)
		}
	}
	if d := time.Since(start); d > 10*every {
		t.Fatalf("3 keep-alives took %v at an interval of %v", d, every)
	}
}
