package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/wstest"
)

// The responses that a connection writes itself (graph.StreamHolder: topUpdates and rankUpdates after the first)
// are byte for byte the messages gqlgen's transport writes for the same subscription, on both protocols: one
// connection of each kind (websockets.noStreams) subscribes with the same ids and documents (aliases,
// fragments, __typename, every field; names and metadata that encoding/json escapes), and after each
// submission both must have received the same messages. The operations counter counts both kinds alike.
func TestStreamedResponsesMatchGqlgen(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "frames"})
	const top = `subscription($b: ID!) { t: topUpdates(board: $b, first: 5) { v: version ...U entries { __typename ` +
		entryFields + ` r2: rank } } } fragment U on TopUpdate { board window period snapshot size removed __typename }`
	const rank = `subscription($b: ID!, $p: ID!) { mine: rankUpdates(board: $b, playerId: $p) { __typename ` +
		entryFields + ` } }`
	s.submit(t, map[string]any{"board": "frames", "playerId": "watched", "score": 1.0,
		"displayName": "Zoë <script>&\u2029", "metadata": map[string]any{"tag": "</b>&<", "u": "\u2028"}})
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		t.Run(proto, func(t *testing.T) {
			dial := func(noStreams bool) *wstest.Conn {
				s.App.streams.Tune(func(set *gqlstream.Settings) { set.NoStreams = noStreams })
				c := wstest.Dial(t, s.WSURL, proto, nil)
				s.App.streams.Tune(func(set *gqlstream.Settings) { set.NoStreams = false })
				for id, q := range map[string]string{"top": top, "rank": rank} {
					if err := c.Subscribe(id, q, map[string]any{"b": "frames", "p": "watched"}); err != nil {
						t.Fatal(err)
					}
				}
				return c
			}
			streamed, gqlgen := dial(false), dial(true)
			frames := func() float64 { return metricSum(t, s, "lb_websocket_streamed_responses_total") }
			framesBefore := frames()
			ops := func() float64 {
				return metricSum(t, s, "lb_graphql_operations_total", `type="subscription"`, `outcome="ok"`)
			}
			// next reads the next message of id from c, skipping nothing: every message must be of top or rank.
			pending := map[*wstest.Conn][]wstest.Message{}
			next := func(c *wstest.Conn, id string) wstest.Message {
				t.Helper()
				for i, m := range pending[c] {
					if m.ID == id {
						pending[c] = append(pending[c][:i], pending[c][i+1:]...)
						return m
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				for {
					m, err := c.Next(ctx)
					if err != nil {
						t.Fatalf("waiting for %s: %v", id, err)
					}
					if !m.IsData() {
						t.Fatalf("unexpected message %s", m.Raw)
					}
					if m.ID == id {
						return m
					}
					pending[c] = append(pending[c], m)
				}
			}
			same := func(step int, id string) {
				t.Helper()
				a, b := next(streamed, id), next(gqlgen, id)
				if !bytes.Equal(a.Raw, b.Raw) {
					t.Fatalf("step %d, %s:\nstreamed %s\n  gqlgen %s", step, id, a.Raw, b.Raw)
				}
			}
			same(0, "top")
			same(0, "rank")
			opsBefore := ops()
			name := "Ada <b>&amp; \u2028"
			for i := 1; i <= 12; i++ {
				// Each submission takes rank 1 of the top 5 (a new version) and moves the watched player down one
				// rank (a new entry for the rank subscriptions): one message of each per step on both connections.
				in := map[string]any{"board": "frames", "playerId": fmt.Sprintf("p%d-%s", i, proto), "score": float64(100 + i)}
				if i%3 == 0 {
					in["displayName"] = name
					in["metadata"] = map[string]any{"html": "<i>&</i>", "n": []any{1, 2.5, "x"}}
				}
				s.submit(t, in)
				same(i, "top")
				same(i, "rank")
			}
			if n := frames() - framesBefore; n < 2*12 {
				t.Fatalf("%v responses went the stream path, want the 24 after the first ones", n)
			}
			if n := ops() - opsBefore; n != 4*12 {
				t.Fatalf("operations counter grew by %v, want %d (every response of both connections)", n, 4*12)
			}
			streamed.Close()
			gqlgen.Close()
		})
	}
}

// Streamed topUpdates of one document and variables share what renders them (the generated operation and field
// context of one of their subscriptions, graph's topRenderers), and it stays theirs when the subscription it came
// from ends: after the first subscriber of a document has completed, and after it has closed its connection, the
// others' messages are still byte for byte gqlgen's (a connection with websockets.noStreams), and a subscriber
// that comes later gets its snapshot and updates alike.
func TestStreamedRenderingOutlivesItsFirstSubscriber(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "owner"})
	const top = `subscription($b: ID!) { t: topUpdates(board: $b, first: 5) { version snapshot entries { ` +
		entryFields + ` } removed } }`
	vars := map[string]any{"b": "owner"}
	s.submit(t, map[string]any{"board": "owner", "playerId": "p0", "score": 1.0, "displayName": "Zoë <b>&"})
	dial := func(noStreams bool) *wstest.Conn {
		s.App.streams.Tune(func(set *gqlstream.Settings) { set.NoStreams = noStreams })
		c := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		s.App.streams.Tune(func(set *gqlstream.Settings) { set.NoStreams = false })
		doc := top
		if noStreams {
			// Another text of the same document: rendered apart from the streamed ones (an update is rendered
			// once per document text and variables, by whichever subscriber comes first).
			doc += " "
		}
		if err := c.Subscribe("top", doc, vars); err != nil {
			t.Fatal(err)
		}
		return c
	}
	next := func(c *wstest.Conn) wstest.Message {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := dial(false) // its subscription's state renders the document's updates
	next(first)
	streamed, gqlgen := dial(false), dial(true)
	a, b := next(streamed), next(gqlgen)
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Fatalf("snapshot:\nstreamed %s\n  gqlgen %s", a.Raw, b.Raw)
	}
	// Versions count per subscriber: each streamed connection is compared with a gqlgen one that subscribed with it.
	step := 0
	submitAndCompare := func(pairs ...[2]*wstest.Conn) {
		t.Helper()
		for range 3 {
			step++
			s.submit(t, map[string]any{"board": "owner", "playerId": fmt.Sprintf("p%d", step),
				"score": float64(10 + step), "displayName": "Ada <i>&amp;</i> \u2028"})
			for _, p := range pairs {
				if got, want := next(p[0]), next(p[1]); !bytes.Equal(got.Raw, want.Raw) {
					t.Fatalf("step %d:\nstreamed %s\n  gqlgen %s", step, got.Raw, want.Raw)
				}
			}
		}
	}
	submitAndCompare([2]*wstest.Conn{streamed, gqlgen})
	if err := first.Stop("top"); err != nil {
		t.Fatal(err)
	}
	for m := next(first); m.Type != "complete"; m = next(first) { // the updates it had not read yet, then its end
		if !m.IsData() {
			t.Fatalf("after complete: %s", m.Raw)
		}
	}
	submitAndCompare([2]*wstest.Conn{streamed, gqlgen})
	first.Close()
	late, lateGqlgen := dial(false), dial(true)
	if a, b := next(late), next(lateGqlgen); !bytes.Equal(a.Raw, b.Raw) {
		t.Fatalf("late snapshot:\nstreamed %s\n  gqlgen %s", a.Raw, b.Raw)
	}
	submitAndCompare([2]*wstest.Conn{streamed, gqlgen}, [2]*wstest.Conn{late, lateGqlgen})
	lateGqlgen.Close()
	streamed.Close()
	gqlgen.Close()
	late.Close()
}

// Peers that read too slowly do not hold up the others' updates: a stream writer writes what a peer's socket takes
// at once, hands a peer that has not taken it all to a goroutine of its own, and that peer's later writes stay off
// the stream writers for gqlstream.SlowFor, so each slow connection costs the writers one hand-off, not one each time its
// buffers fill.
// The slow peers here read in bursts: nothing for 800 ms (their socket buffers fill), then what there is, for at
// most 200 ms.
func TestSlowPeersLeaveTheStreamWriters(t *testing.T) {
	// The server's sockets send from 64 KiB buffers (Linux's default grows to 4 MB): with those, a slow peer's
	// buffers filled only when a write turn brought more than ~4 MB, which the snapshots' burst did; under make
	// test's load the snapshots once came in writes small enough to be taken, and no write was handed off in 30 s.
	cfg := testConfig(t)
	s := startServerWrapped(t, cfg, testLogger(t), func(ln net.Listener) net.Listener { return smallSendBuffers{ln} })
	s.create(t, map[string]any{"id": "slow"})
	// Every row carries ~700 bytes of metadata, so that one write turn of a slow connection (60 updates of the
	// top 100, ~5 MB) is more than the kernel's socket buffers hold even when a loaded machine delivers few
	// (merged) updates per pause.
	var in []map[string]any
	for i := range 100 {
		in = append(in, map[string]any{"board": "slow", "playerId": fmt.Sprintf("player-with-a-long-name-%03d", i),
			"score": float64(i), "metadata": map[string]any{"bio": strings.Repeat("x", 700)}})
	}
	s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": in}, nil)
	const slow, subsEach = 3, 60
	// Hand-offs are counted from here: the first of each peer may come with its subscriptions' snapshots.
	slowWrites := func() float64 { return metricSum(t, s, "lb_websocket_slow_writes_total") }
	before, start := slowWrites(), time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for c := range slow {
		ws, _, err := websocket.DefaultDialer.Dial(s.WSURL, http.Header{"Sec-WebSocket-Protocol": {wstest.TransportWS}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		// A small receive buffer (Linux would grow it to tens of MB): the peer's buffers fill within a pause.
		if err := ws.NetConn().(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
			t.Fatal(err)
		}
		if _, ack, err := ws.ReadMessage(); err != nil || !strings.Contains(string(ack), "connection_ack") {
			t.Fatalf("connection %d: no ack: %s %v", c, ack, err)
		}
		for i := range subsEach { // every update of the top 100 is ~80 KB: ~5 MB a connection per submission
			if err := ws.WriteJSON(map[string]any{"type": "subscribe", "id": fmt.Sprint(i), "payload": map[string]any{
				"query": topUpdatesSub, "variables": map[string]any{"b": "slow", "n": 100}}}); err != nil {
				t.Fatal(err)
			}
		}
		// From here the bytes are read raw (a read deadline would end a gorilla connection): frames are not
		// looked at, only taken out of the socket.
		raw := ws.NetConn()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				select {
				case <-stop:
					return
				case <-time.After(800 * time.Millisecond):
				}
				// Drain until the server has sent nothing for 50 ms, for 200 ms at most: a peer that read for as
				// long as the server kept sending would not be slow (on a loaded machine the server wrote to it
				// without a pause, and its buffers never filled).
				burst := time.Now().Add(200 * time.Millisecond)
				for time.Now().Before(burst) {
					_ = raw.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					if _, err := raw.Read(buf); err != nil {
						if !isTimeout(err) {
							return
						}
						break
					}
				}
			}
		}()
	}
	l := subscribeLive(t, s, "slow", 10)
	waitLive(t, s, l, "slow", 5*time.Second)
	// Each submission takes rank 1: every row of every top 100 moves, a full diff each time. At least 60 rounds,
	// and on until a write has been handed off (a loaded machine may deliver too few updates to fill the slow
	// peers' buffers in the first pauses), within a generous bound.
	rounds := 0
	for ; rounds < 60 || slowWrites() == before && time.Since(start) < 30*time.Second; rounds++ {
		s.submit(t, map[string]any{"board": "slow", "playerId": fmt.Sprintf("climber-%d", rounds),
			"score": float64(1000 + rounds)})
		time.Sleep(50 * time.Millisecond)
	}
	waitLive(t, s, l, "slow", 5*time.Second) // the reading client kept up
	handoffs, elapsed := int64(slowWrites()-before), time.Since(start)
	t.Logf("%d hand-offs for %d slow connections over their snapshots and %d updates in %v (frames %v)", handoffs, slow, rounds,
		elapsed, metricSum(t, s, "lb_websocket_streamed_responses_total"))
	if handoffs == 0 {
		t.Fatal("no write was handed off: the slow peers' socket buffers never filled (make the updates bigger)")
	}
	// At most one each per gqlstream.SlowFor begun (a slow run under the race detector may outlast it).
	if handoffs > int64(slow*(int(elapsed/gqlstream.SlowFor)+2)) {
		t.Fatalf("%d hand-offs for %d slow connections: the slow peers keep coming back to the stream writers",
			handoffs, slow)
	}
}

// A stream writer's write sets no deadline (writeNow), but the connection's other writes do (the first
// responses, pings), and a deadline that has passed makes the socket refuse every write until it is cleared:
// the stream writes must clear it, not take it for a failed peer and close the connection. Here every other
// write's deadline is 50 ms, and the updates come after it has passed; each must arrive, on both protocols.
func TestStreamWritesAfterAnExpiredDeadline(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "late"})
	s.submit(t, map[string]any{"board": "late", "playerId": "p0", "score": 1.0})
	s.App.streams.Tune(func(set *gqlstream.Settings) { set.WriteTimeout = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	score := 100.0
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		c := wstest.Dial(t, s.WSURL, proto, nil)
		if err := c.Subscribe("t", `subscription { topUpdates(board: "late", first: 3) { version entries { playerId score } } }`, nil); err != nil {
			t.Fatal(err)
		}
		var u struct {
			TopUpdates struct {
				Version int
				Entries []struct {
					PlayerID string
					Score    float64
				}
			}
		}
		c.NextData(t, ctx, "t", &u) // the snapshot: gqlgen's response, written with the 50 ms deadline
		for i := 1; i <= 3; i++ {
			time.Sleep(150 * time.Millisecond) // the deadline of the connection's last own write passes
			player := fmt.Sprint(proto, "-", i)
			score++ // takes rank 1
			s.submit(t, map[string]any{"board": "late", "playerId": player, "score": score})
			for {
				c.NextData(t, ctx, "t", &u)
				if len(u.TopUpdates.Entries) > 0 && u.TopUpdates.Entries[0].PlayerID == player {
					break
				}
			}
			if u.TopUpdates.Version != i+1 {
				t.Fatalf("%s: update %d came as version %d, want %d", proto, i, u.TopUpdates.Version, i+1)
			}
		}
		c.Close()
	}
}

// smallSendBuffers is a listener whose connections send from 64 KiB socket buffers.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}
