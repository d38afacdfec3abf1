package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A periodClosed subscription of a board that is deleted ends (its channel closes), so that it never receives the
// close events of a board created later with the same id; a new subscription to the new board gets them.
func TestCloseFeedEndsWhenBoardDeleted(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	ctx := context.Background()
	f := NewCloseFeed(st, nil, 20*time.Millisecond, nil)
	def := leaderboard.Board{ID: "cup", Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}}
	createBoard(t, st, def)
	old, err := f.Subscribe(t.Context(), "cup")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.DeleteBoard(ctx, "cup"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	select {
	case ev, open := <-old:
		if open {
			t.Fatalf("an event of the deleted board: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription of the deleted board did not end")
	}
	if _, err := f.Subscribe(t.Context(), "cup"); leaderboard.ErrorCode(err) != leaderboard.NotFound {
		t.Fatalf("subscribing to the deleted board: %v, want NOT_FOUND", err)
	}
	createBoard(t, st, def)
	fresh, err := f.Subscribe(t.Context(), "cup")
	if err != nil {
		t.Fatal(err)
	}
	id, recorded, err := st.RecordClose(ctx, "cup", leaderboard.Season, "s1", st.Now())
	if err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	select {
	case ev := <-fresh:
		if ev.OutboxID != id || ev.Period != "s1" {
			t.Fatalf("event %+v, want %s", ev, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new board's subscription got no event")
	}
}

// A board deleted and created again (same definition) through another server while the feed's reads cannot reach
// Redis, so that no poll sees the board missing: the feed's subscription ends as deleted as soon as the hub
// receives the deletion notice, and gets none of the new board's close events, although the board exists again
// and the feed's first read after the gap finds the new board's event; a subscription made afterwards follows the
// new board. Before, the old subscription stayed and got the new board's events.
func TestCloseFeedEndsWhenBoardRecreated(t *testing.T) {
	addr := redistest.SharedStandalone(t).Addr
	prefix := redistest.Prefix(t)
	a := newStore(t, redistest.SharedStandalone(t).Client(t), prefix) // the other server
	feedClient := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = feedClient.Close() })
	g := redistest.NewGate()
	feedClient.AddHook(g)
	h := startHub(t, newStore(t, redistest.SharedStandalone(t).Client(t), prefix), Config{})
	f := NewCloseFeed(newStore(t, feedClient, prefix), h, 20*time.Millisecond, nil)
	ctx := context.Background()
	def := leaderboard.Board{ID: "cup", Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}}
	createBoard(t, a, def)
	end := new(Ending)
	old, err := f.Subscribe(WithEnding(t.Context(), end), "cup")
	if err != nil {
		t.Fatal(err)
	}
	if _, recorded, err := a.RecordClose(ctx, "cup", leaderboard.Season, "s0", a.Now()); err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	select {
	case ev := <-old:
		if ev.Period != "s0" {
			t.Fatalf("event %+v, want s0", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event of the board")
	}

	g.Shut()
	if ok, err := a.DeleteBoard(ctx, "cup"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	createBoard(t, a, def)
	newID, recorded, err := a.RecordClose(ctx, "cup", leaderboard.Season, "s1", a.Now())
	if err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	h.WaitDeleted(ctx, "cup")
	g.Release()
	endedAsDeleted(t, old, end)

	fresh, err := f.Subscribe(t.Context(), "cup")
	if err != nil {
		t.Fatal(err)
	}
	id, recorded, err := a.RecordClose(ctx, "cup", leaderboard.Season, "s2", a.Now())
	if err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	select {
	case ev := <-fresh:
		if ev.OutboxID != id || ev.Period != "s2" {
			t.Fatalf("event %+v, want %s (s2; s1 was %s, before the subscription)", ev, id, newID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new board's subscription got no event")
	}
}

// A deletion that the feed hears no notice of (here a feed without a hub; on a server, a notice lost while the
// hub reconnected): a board created again with another definition before the next poll is told from the deleted
// one by its definition, and the subscription ends as deleted at that poll, without the new board's events.
func TestCloseFeedPollSeesBoardRecreatedWithOtherDefinition(t *testing.T) {
	prefix := redistest.Prefix(t)
	a := newStore(t, redistest.SharedStandalone(t).Client(t), prefix) // the other server
	feedClient := redis.NewClient(&redis.Options{Addr: redistest.SharedStandalone(t).Addr})
	t.Cleanup(func() { _ = feedClient.Close() })
	g := redistest.NewGate()
	feedClient.AddHook(g)
	f := NewCloseFeed(newStore(t, feedClient, prefix), nil, 20*time.Millisecond, nil)
	ctx := context.Background()
	def := leaderboard.Board{ID: "cup", Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}}
	createBoard(t, a, def)
	end := new(Ending)
	old, err := f.Subscribe(WithEnding(t.Context(), end), "cup")
	if err != nil {
		t.Fatal(err)
	}
	g.Shut()
	if ok, err := a.DeleteBoard(ctx, "cup"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	def.Order = leaderboard.Asc
	createBoard(t, a, def)
	if _, recorded, err := a.RecordClose(ctx, "cup", leaderboard.Season, "s1", a.Now()); err != nil || !recorded {
		t.Fatalf("record: %v %v", recorded, err)
	}
	g.Release()
	endedAsDeleted(t, old, end)
}

// endedAsDeleted waits (10 s at most) for the close subscription old of a deleted board to end, without an event
// (the board created again has them), as ended by the deletion (end).
func endedAsDeleted(t *testing.T, old <-chan leaderboard.CloseEvent, end *Ending) {
	t.Helper()
	select {
	case ev, open := <-old:
		if open {
			t.Fatalf("the old subscription got an event of the board created again: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription of the deleted board did not end")
	}
	if !end.Deleted() {
		t.Fatal("the subscription did not end as deleted")
	}
}
