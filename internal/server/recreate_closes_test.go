package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// subscribeCloses starts a periodClosed subscription "c" of board on a connection of its own to s.
func subscribeCloses(t *testing.T, s *testServer, board string) *wstest.Conn {
	t.Helper()
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := conn.Subscribe("c", periodClosedSub, map[string]any{"b": board}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// closeDays moves the shared clock on a day at a time, with a score on board each day (through s), until every
// one of conns has got a close event of board on its subscription "c" (a subscription starts reading the outbox
// a moment after its start message: a close recorded before may not reach it).
func closeDays(t *testing.T, s *testServer, clock *closeClock, board string, conns ...*wstest.Conn) {
	t.Helper()
	got := make([]bool, len(conns))
	for day := 0; ; day++ {
		if day == 10 {
			t.Fatalf("%s: subscriptions with a close event after 10 days: %v", board, got)
		}
		s.submit(t, map[string]any{"board": board, "playerId": fmt.Sprintf("p%d", day), "score": float64(day)})
		now := clock.Now()
		clock.Set(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 1, 0, time.UTC))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		for i, c := range conns {
			for !got[i] {
				m, err := c.Next(ctx)
				if err != nil {
					break // none within the wait: the next day
				}
				if m.ID != "c" {
					continue
				}
				var ev struct{ PeriodClosed struct{ Board string } }
				if r, err := m.Result(); err != nil || !m.IsData() || len(r.Errors) > 0 || json.Unmarshal(r.Data, &ev) != nil ||
					ev.PeriodClosed.Board != board {
					t.Fatalf("subscription %d: want a close event of %s, got %s: %s", i, board, m.Type, m.Payload)
				}
				got[i] = true
			}
		}
		cancel()
		if !slices.Contains(got, false) {
			return
		}
	}
}

// wantNotFoundEnd reads conn until its subscription "c" has ended with one NOT_FOUND error and completed; any
// close event before is a failure (of the board created again: the old one closed no period meanwhile).
func wantNotFoundEnd(t *testing.T, conn *wstest.Conn, within time.Duration, what string) {
	t.Helper()
	wantNotFoundEndAfter(t, conn, within, what, "")
}

// wantNotFoundEndAfter is wantNotFoundEnd that lets close events of periods before period pass: the deleted
// board's own, which closeDays may leave unread on a connection that got its one event a day before the others.
func wantNotFoundEndAfter(t *testing.T, conn *wstest.Conn, within time.Duration, what, period string) {
	t.Helper()
	ctx := ctxT(t, within)
	errored := false
	for {
		m, err := conn.Next(ctx)
		if err != nil {
			t.Fatalf("%s: waiting for the end with NOT_FOUND: %v", what, err)
		}
		if m.ID != "c" {
			continue
		}
		var ev struct{ PeriodClosed struct{ Period string } }
		if r, err := m.Result(); !errored && err == nil && m.IsData() && len(r.Errors) == 0 &&
			json.Unmarshal(r.Data, &ev) == nil && ev.PeriodClosed.Period != "" && ev.PeriodClosed.Period < period {
			continue
		}
		if errored {
			if m.Type != "complete" {
				t.Fatalf("%s: want complete, got %s: %s", what, m.Type, m.Payload)
			}
			return
		}
		if errs := m.Errors(); len(errs) != 1 || errs[0].Code() != string(leaderboard.NotFound) {
			t.Fatalf("%s: want a NOT_FOUND error, got %s: %s", what, m.Type, m.Payload)
		}
		if m.Type == "error" {
			return
		}
		errored = true
	}
}

// A board deleted and created again with the same definition through server a while server b's reads of outboxes
// (XRANGE) are held, so that b's outbox poll cannot see the board missing (as with a poll interval longer than the
// gap), and the new board closes a period meanwhile. The periodClosed subscriptions of the deleted board,
// on a and on b, end with one NOT_FOUND error and complete (the schema: a deleted board's live subscriptions end
// with NOT_FOUND), and get none of the new board's close events; new subscriptions, on both servers, follow the
// new board. Before, only a poll that found the board missing ended them: b's stayed and got the new board's
// close events.
func TestPeriodClosedEndsWhenBoardRecreated(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)}
	cfg := closeTestConfig(t, clock)
	a, b := startServer(t, cfg), startServer(t, cfg)
	g := redistest.NewGate("xrange") // the close feed's reads of the outbox (Store.Closes)
	b.App.rdb.AddHook(g)
	const id = "again"
	def := map[string]any{"id": id, "windows": []string{"DAILY"}, "graceSeconds": 0}
	a.create(t, def)
	subscribe := func(s *testServer) *wstest.Conn { return subscribeCloses(t, s, id) }
	oldA, oldB := subscribe(a), subscribe(b)
	closeDays(t, a, clock, id, oldA, oldB) // both follow the board

	g.Shut()
	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
	a.create(t, def)
	a.submit(t, map[string]any{"board": id, "playerId": "new", "score": 1})
	now := clock.Now()
	day := now.Format("2006-01-02") // the new board's first close; the deleted board's were before it
	clock.Set(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 1, 0, time.UTC))
	waitUntil(t, 10*time.Second, "the new board's close event", func() bool {
		evs, err := a.Store.Closes(context.Background(), id, "0-0", 10)
		return err == nil && len(evs) > 0
	})
	g.Release()
	wantNotFoundEndAfter(t, oldA, 15*time.Second, "the deleting server's old subscription", day)
	wantNotFoundEndAfter(t, oldB, 15*time.Second, "the other server's old subscription", day)

	closeDays(t, a, clock, id, subscribe(a), subscribe(b))
}

// A server whose outbox poll (WEBHOOK_POLL_INTERVAL) is an hour: its periodClosed subscription of a board deleted
// and created again through another server ends with NOT_FOUND as soon as the deletion notice reaches it, with no
// poll at all. Its hub listens to the board's channel while the subscription lasts, as for topUpdates; before,
// nothing of the server listened there for a periodClosed subscription (the wait below failed), and only a poll
// could end it.
func TestPeriodClosedEndsWithoutAPoll(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	slow := cfg
	slow.Closes.PollInterval = time.Hour
	a, b := startServer(t, cfg), startServer(t, slow)
	const id = "no-poll"
	def := map[string]any{"id": id, "windows": []string{"ALL_TIME", "DAILY"}}
	a.create(t, def)
	conn := subscribeCloses(t, b, id)
	rdb := redistest.SharedStandalone(t).Client(t)
	ch := a.Store.Channel(id)
	waitUntil(t, 10*time.Second, "server b listening to the board's channel", func() bool {
		n, err := rdb.PubSubShardNumSub(context.Background(), ch).Result()
		return err == nil && n[ch] > 0
	})
	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": id}, nil)
	a.create(t, def)
	wantNotFoundEnd(t, conn, 10*time.Second, "the subscription of the deleted board")
}
