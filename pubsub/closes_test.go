package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// A periodClosed subscription of a board that is deleted ends (its channel closes), so that it never receives the
// close events of a board created later with the same id; a new subscription to the new board gets them.
func TestCloseFeedEndsWhenBoardDeleted(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	ctx := context.Background()
	f := NewCloseFeed(st, 20*time.Millisecond, nil)
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
