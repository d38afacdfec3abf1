package pubsub

import (
	"fmt"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestTopToken: a token exactly when Top serves from memory, a new one after the list changed, none while a
// change is pending or beyond the cached range.
func TestTopToken(t *testing.T) {
	t.Parallel()
	st := newStore(t, redistest.SharedStandalone(t).Client(t), redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "tt", Windows: []leaderboard.Window{leaderboard.AllTime,
		leaderboard.Daily}})
	for i := range 5 {
		submit(t, st, "tt", fmt.Sprintf("p%d", i), float64(i))
	}
	ctx := t.Context()
	v := leaderboard.View{Board: "tt"}
	if _, ok := h.TopToken(ctx, v, 0, 10); ok {
		t.Fatal("a token for a view the hub does not cache")
	}
	if _, ok := h.TopToken(ctx, leaderboard.View{Board: "nope"}, 0, 10); ok {
		t.Fatal("a token for an unknown board")
	}
	if _, err := h.Top(ctx, v, 0, 10); err != nil { // starts caching the view
		t.Fatal(err)
	}
	token := func(v leaderboard.View, offset, first int) uint64 {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			if tok, ok := h.TopToken(ctx, v, offset, first); ok {
				return tok
			}
			if time.Now().After(deadline) {
				t.Fatalf("no token for %+v within 2s", v)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t1 := token(v, 0, 10)
	if t2 := token(v, 90, 10); t2 != t1 {
		t.Fatalf("the same list has tokens %d and %d", t1, t2)
	}
	if _, ok := h.TopToken(ctx, v, 95, 10); ok {
		t.Fatal("a token beyond the cached range")
	}
	if _, err := h.Top(ctx, leaderboard.View{Board: "tt", Window: leaderboard.Daily}, 0, 10); err != nil {
		t.Fatal(err)
	}
	if td := token(leaderboard.View{Board: "tt", Window: leaderboard.Daily}, 0, 10); td == t1 {
		t.Fatal("two views share a token")
	}
	h.Changed("tt")
	if _, ok := h.TopToken(ctx, v, 0, 10); ok {
		t.Fatal("a token while a change is pending")
	}
	submit(t, st, "tt", "new", 100)
	deadline := time.Now().Add(2 * time.Second)
	for {
		p, err := h.Top(ctx, v, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.Entries[0].PlayerID == "new" {
			if token(v, 0, 10) == t1 {
				t.Fatal("the new list kept the old token")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Top did not show the new leader")
		}
	}
}
