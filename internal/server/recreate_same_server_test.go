package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// An admin deletes a board and creates it again on the server that serves its screens, which subscribe again at
// once: the old subscriptions end with NOT_FOUND; the new ones, made after the board was created again, follow it
// (they must not end with NOT_FOUND when the deletion notice reaches the server after them).
func TestRecreatedOnSameServerNewSubscriptionsLive(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	for i := range 10 {
		id := fmt.Sprintf("same-%d", i)
		s.create(t, map[string]any{"id": id})
		s.submit(t, map[string]any{"board": id, "playerId": "p", "score": 1})
		ctx := ctxT(t, 20*time.Second)
		conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "top", nil)
		s.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
		s.create(t, map[string]any{"id": id, "order": "ASC"})
		if err := conn.Subscribe("top2", topUpdatesSub, map[string]any{"b": id, "n": 10}); err != nil {
			t.Fatal(err)
		}
		s.submit(t, map[string]any{"board": id, "playerId": "q", "score": 7})
		gotTop2, ended := false, false
		for !gotTop2 || !ended {
			m, err := conn.Next(ctx)
			if err != nil {
				t.Fatalf("round %d: top2 data %v, old ended %v: %v", i, gotTop2, ended, err)
			}
			switch {
			case m.ID == "top2" && len(m.Errors()) > 0:
				t.Fatalf("round %d: the subscription made after the re-creation ended: %s", i, m.Payload)
			case m.ID == "top2" && m.Type == "complete":
				t.Fatalf("round %d: the subscription made after the re-creation completed", i)
			case m.ID == "top2" && m.IsData():
				gotTop2 = true
			case m.ID == "top" && m.Type == "complete":
				ended = true
			}
		}
		// The old one's end is the notice taken; an end of top2 by it would come before top2's own completion.
		conn.Stop("top2")
		for {
			m, err := conn.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID == "top2" && (len(m.Errors()) > 0) {
				t.Fatalf("round %d: the subscription made after the re-creation ended: %s", i, m.Payload)
			}
			if m.ID == "top2" && m.Type == "complete" {
				break
			}
		}
		conn.Close()
	}
}
