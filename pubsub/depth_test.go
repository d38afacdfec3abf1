package pubsub

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestListsReadAsDeepAsShown: a view that only subscriptions keep is read as deep as the longest list they show; a
// subscriber that shows more gets a first snapshot as long as it asks for, and Top serves from memory only the
// ranks the list holds (beyond them it reads the store and makes the view MaxFirst deep). The store's own reads
// are the oracle for every list.
func TestListsReadAsDeepAsShown(t *testing.T) {
	st := hookedStore(t)
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "d"})
	for i := range 150 {
		submit(t, st, "d", fmt.Sprintf("p%03d", i), float64(i))
	}
	ctx := t.Context()
	v := leaderboard.View{Board: "d"}
	score := 1000.0
	// rowsPerRead makes one change at rank 1, waits until c shows it and returns the rows the hub read for it.
	rowsPerRead := func(c *topClient) uint64 {
		t.Helper()
		before := h.Stats().ListRows
		score++
		submit(t, st, "d", "leader", score)
		waitTop(t, c, st, v, 5*time.Second)
		return h.Stats().ListRows - before
	}

	ch10, err := h.SubscribeTop(ctx, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	c10 := follow(ch10, 10)
	waitTop(t, c10, st, v, 5*time.Second)
	// One or two reads of 10 rows each (a second one may follow a change at once); 100 per read before.
	if n := rowsPerRead(c10); n == 0 || n%10 != 0 || n > 30 {
		t.Fatalf("a change read %d rows for top-10 subscribers, want 10 per read", n)
	}
	if _, ok := h.TopToken(ctx, v, 0, 10); !ok {
		t.Fatal("Top does not serve ranks 1-10 from memory")
	}
	if _, ok := h.TopToken(ctx, v, 0, 11); ok {
		t.Fatal("Top would serve rank 11 from a list read 10 deep")
	}

	// A deeper subscriber's first update is a snapshot of all it asks for.
	ch50, err := h.SubscribeTop(ctx, v, 50)
	if err != nil {
		t.Fatal(err)
	}
	c50 := follow(ch50, 50)
	var u *TopUpdate
	select {
	case u = <-c50.head:
	case <-time.After(5 * time.Second):
		t.Fatal("no first update for a top-50 subscriber")
	}
	want, err := st.Top(ctx, v, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Snapshot || u.Version != 1 || u.Size != want.Size ||
		!slices.Equal(fullRows(u.Entries, u.Size), fullRows(want.Entries, want.Size)) {
		t.Fatalf("first top-50 update: snapshot %v version %d size %d, %d rows\n got  %v\n want %v", u.Snapshot,
			u.Version, u.Size, len(u.Entries), fullRows(u.Entries, u.Size), fullRows(want.Entries, want.Size))
	}
	if n := rowsPerRead(c50); n == 0 || n%50 != 0 || n > 150 {
		t.Fatalf("a change read %d rows for top-10 and top-50 subscribers, want 50 per read", n)
	}
	waitTop(t, c10, st, v, 5*time.Second)

	// Beyond the list Top reads the store, and from then on the view is read MaxFirst deep and served from memory.
	if _, ok := h.TopToken(ctx, v, 0, 80); ok {
		t.Fatal("Top would serve ranks 1-80 from a list read 50 deep")
	}
	p, err := h.Top(ctx, v, 0, 80)
	if err != nil {
		t.Fatal(err)
	}
	want, err = st.Top(ctx, v, 0, 80)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fullRows(p.Entries, p.Size), fullRows(want.Entries, want.Size)) || p.Size != want.Size {
		t.Fatalf("Top(0, 80) through the hub:\n got  %v\n want %v", fullRows(p.Entries, p.Size),
			fullRows(want.Entries, want.Size))
	}
	waitFor(t, 5*time.Second, "ranks 1-100 served from memory", func() bool {
		_, ok := h.TopToken(ctx, v, 0, MaxFirst)
		return ok
	})
	if p, err = h.Top(ctx, v, 0, 80); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fullRows(p.Entries, p.Size), fullRows(want.Entries, want.Size)) || p.Size != want.Size {
		t.Fatalf("Top(0, 80) from memory:\n got  %v\n want %v", fullRows(p.Entries, p.Size),
			fullRows(want.Entries, want.Size))
	}
	if n := rowsPerRead(c50); n == 0 || n%MaxFirst != 0 {
		t.Fatalf("a change read %d rows for a view Top serves, want %d per read", n, MaxFirst)
	}
	waitTop(t, c10, st, v, 5*time.Second)
	if _, _, _, err := c50.state(); err != nil {
		t.Fatal(err)
	}
}

// TestShortBoardCoversDeeperLists: a list read 10 deep from a board of 5 players is the whole ranking, so a top-100
// subscriber and Top(0, 100) are served from it.
func TestShortBoardCoversDeeperLists(t *testing.T) {
	st, h := boardWithPlayers(t, "s", 5)
	ctx := t.Context()
	v := leaderboard.View{Board: "s"}
	ch10, err := h.SubscribeTop(ctx, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, follow(ch10, 10), st, v, 5*time.Second)
	waitFor(t, 5*time.Second, "Top serving a 5-player board's whole ranking from a list read 10 deep", func() bool {
		_, ok := h.TopToken(ctx, v, 0, MaxFirst)
		return ok
	})
	ch100, err := h.SubscribeTop(ctx, v, MaxFirst)
	if err != nil {
		t.Fatal(err)
	}
	c100 := follow(ch100, MaxFirst)
	waitTop(t, c100, st, v, 5*time.Second)
	submit(t, st, "s", "late", 50)
	waitTop(t, c100, st, v, 5*time.Second)
}
