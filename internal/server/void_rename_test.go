package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// deletePrefixKeys deletes every key of the test's key prefix on the server's standalone Redis (what a FLUSHALL
// does to this test's boards, sharded ones included, without touching other tests' keys).
func deletePrefixKeys(t *testing.T, s *testServer) {
	t.Helper()
	c := redisClient(t, s)
	keys, err := c.Keys(ctxT(t, 5*time.Second), s.App.cfg.KeyPrefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := loseKeys(ctxT(t, 5*time.Second), c, keys); err != nil {
		t.Fatal(err)
	}
}

// A void that changes nothing of a closed period writes no version of its standings and sends no correction,
// also when a player of that period has taken another display name since its close (a submission to a later
// period): the name is not part of what the void changed. Checked while Redis holds the closed day and after its
// keys are gone (the scratch replay).
func TestVoidAfterRenameSendsNoCorrection(t *testing.T) {
	t.Parallel()
	for _, expired := range []bool{false, true} {
		t.Run(fmt.Sprintf("expired=%v", expired), func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			cfg := ledgerConfig(t, clock)
			cfg.Closes.CheckInterval = 20 * time.Millisecond
			s := startServer(t, cfg)
			s.create(t, map[string]any{"id": "rn", "windows": []string{"DAILY", "ALL_TIME"}, "graceSeconds": 60})
			s.submit(t, map[string]any{"board": "rn", "playerId": "ann", "score": 50, "displayName": "Ann", "eventId": "a1"})
			s.submit(t, map[string]any{"board": "rn", "playerId": "bob", "score": 70, "eventId": "b1"})
			clock.Set(ledgerStart.Add(15*time.Hour + 2*time.Minute)) // the day and its grace are over
			waitUntil(t, 10*time.Second, "the day's close event", func() bool {
				evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "rn", "0-0", 10)
				return err == nil && len(evs) == 1
			})
			if expired {
				clock.Set(ledgerStart.Add(10 * 24 * time.Hour)) // past the day's retention
			}
			// The next (open) day: ann takes another name, cid submits an event that is then voided.
			s.submit(t, map[string]any{"board": "rn", "playerId": "ann", "score": 10, "displayName": "Annie", "eventId": "a2"})
			s.submit(t, map[string]any{"board": "rn", "playerId": "cid", "score": 5, "eventId": "c2"})
			var n struct{ VoidScoreEvents int }
			s.must(t, testAdminKey, voidMutation, map[string]any{"b": "rn", "ids": []string{"c2"}, "r": "fraud"}, &n)
			if n.VoidScoreEvents != 1 {
				t.Fatalf("voided %d, want 1", n.VoidScoreEvents)
			}
			// The void's correction ran inside the call: the outbox holds what it sent.
			evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "rn", "0-0", 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%s v%d", e.Period, e.Version))
			}
			if len(evs) != 1 {
				t.Fatalf("close events after a void of an open period's event: %s (want the close alone)",
					strings.Join(got, ", "))
			}
		})
	}
}
