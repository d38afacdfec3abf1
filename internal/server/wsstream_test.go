package server

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

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
	s.submit(t, map[string]any{"board": "frames", "playerId": "watched", "score": 1.0})
	for _, proto := range []string{wstest.TransportWS, wstest.LegacyWS} {
		t.Run(proto, func(t *testing.T) {
			dial := func(noStreams bool) *wstest.Conn {
				s.App.ws.mu.Lock()
				s.App.ws.noStreams = noStreams
				s.App.ws.mu.Unlock()
				c := wstest.Dial(t, s.WSURL, proto, nil)
				s.App.ws.mu.Lock()
				s.App.ws.noStreams = false
				s.App.ws.mu.Unlock()
				for id, q := range map[string]string{"top": top, "rank": rank} {
					if err := c.Subscribe(id, q, map[string]any{"b": "frames", "p": "watched"}); err != nil {
						t.Fatal(err)
					}
				}
				return c
			}
			streamed, gqlgen := dial(false), dial(true)
			frames := streamedFrames.Load()
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
			if n := streamedFrames.Load() - frames; n < 2*12 {
				t.Fatalf("%d responses went the stream path, want the 24 after the first ones", n)
			}
			if n := ops() - opsBefore; n != 4*12 {
				t.Fatalf("operations counter grew by %v, want %d (every response of both connections)", n, 4*12)
			}
			streamed.Close()
			gqlgen.Close()
		})
	}
}
