package server

import (
	"testing"
	"time"
)

// A close event delivered before Redis was lost, whose outbox id the ledger does not have: the state a failed
// ledger.Announced leaves (the database unreachable for that one statement, right after close.lua sent the event
// and set the fence to its id; the close check never calls announce again for a fence holding an id). The delivery
// itself was recorded (outcome 'delivered'). After a FLUSHALL the restore sets the fence waiting and the close
// check announces version 1 again, under a new outbox id: the webhook must not deliver it a second time (before
// the fix in webhook.go it did, under the new id, which receivers cannot dedupe).
func TestDeliveredCloseWithoutRecordedOutboxIDNotSentAgain(t *testing.T) {
	t.Parallel()
	day := ledgerStart
	clock := &closeClock{t: day}
	rx := newFlakyReceiver(t)
	s, rdb, pool := durableSetup(t, clock, rx)
	clock.Set(day.Add(15*time.Hour + 2*time.Minute))
	h := rx.next(t, "the close event")
	waitUntil(t, 10*time.Second, "the delivery in the ledger", func() bool {
		var n int
		err := pool.QueryRow(ctxT(t, 5*time.Second), `SELECT count(*) FROM close_deliveries WHERE outcome = 'delivered'`).Scan(&n)
		return err == nil && n == 1
	})
	// What a failed Announced leaves: the ledger without the event's outbox id.
	if _, err := pool.Exec(ctxT(t, 5*time.Second), `UPDATE closes SET outbox_id = NULL, announced_ms = NULL`); err != nil {
		t.Fatal(err)
	}
	flushAndWaitRestored(t, s, rdb)
	// The next day closes: the close checker looks at the board again.
	s.submit(t, map[string]any{"board": "cup", "playerId": "dan", "score": 5, "eventId": "d1"})
	clock.Set(day.Add(39*time.Hour + 2*time.Minute))
	for n := rx.next(t, "the next day's close event"); n.payload.Period != "2031-03-15"; n = rx.next(t, "the next day's close event") {
	}
	time.Sleep(time.Second)
	var again []string
	for _, r := range rx.requests() {
		if r.status == 200 && r.payload.Period == "2031-03-14" && r.id != h.id {
			again = append(again, r.id)
		}
	}
	if len(again) > 0 {
		t.Fatalf("2031-03-14 (version 1), delivered as %s and recorded as delivered, went out again as %v", h.id, again)
	}
}
