package pubsub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// closedWithin waits until a subscription's channel is closed, draining what it still holds.
func closedWithin[T any](t *testing.T, ch <-chan T, within time.Duration, what string) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s: still open after %v", what, within)
		}
	}
}

// recreated runs the scenario of a board deleted and created again through another server (store a) while the
// hub's reads (through its own store, behind g) cannot reach Redis: the hub learns of the deletion only from its
// notice, and its next read finds the new board. It returns once the hub has received the notice.
func recreated(t *testing.T, h *Hub, g *redistest.Gate, a *leaderboard.Store, def leaderboard.Board) {
	t.Helper()
	h.mu.RLock()
	old := h.boards[def.ID]
	h.mu.RUnlock()
	if old == nil {
		t.Fatal("the hub does not watch the board")
	}
	g.Shut()
	defer g.Release()
	ctx := context.Background()
	if ok, err := a.DeleteBoard(ctx, def.ID); err != nil || !ok {
		t.Fatalf("DeleteBoard: %v %v", ok, err)
	}
	createBoard(t, a, def)
	waitFor(t, 10*time.Second, "the deletion notice", old.deleted.Load)
}

// A board deleted and created again (3 -> 5 shards) through another server before this server's hub read it
// again: the hub's subscriptions end, each marked as ended by the deletion (NOT_FOUND for the clients), also
// though the board exists again; subscriptions made afterwards follow the new board on every one of its shards,
// and Top serves the new board's list, never the old one's. Before, the old subscriptions stayed on the old
// layout (3 shard channels) and new ones joined them: writes on shards 3 and 4 never reached them.
func TestRecreatedShardedBoardEndsSubscriptions(t *testing.T) {
	cl := redistest.SharedCluster(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, cl.Client(t), prefix) // the other server
	hubClient := cl.Client(t)
	g := redistest.NewGate()
	hubClient.AddHook(g)
	hs := newStore(t, hubClient, prefix)
	h := startHub(t, hs, Config{})
	oracle := newStore(t, cl.Client(t), prefix)

	const id = "reshard"
	createBoard(t, a, leaderboard.Board{ID: id, Shards: 3})
	for i := range 9 {
		submit(t, a, id, fmt.Sprintf("p%d", i), float64(i))
	}
	v := leaderboard.View{Board: id}
	end := new(Ending)
	ctx := WithEnding(t.Context(), end)
	ch, err := h.SubscribeTop(ctx, v, 50)
	if err != nil {
		t.Fatal(err)
	}
	c := follow(ch, 50)
	rankEnd := new(Ending)
	rc, err := h.SubscribeRank(WithEnding(t.Context(), rankEnd), v, "p4")
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, c, a, v, 5*time.Second)
	nextEntry(t, rc, 5*time.Second)
	if _, err := h.Top(context.Background(), v, 0, 50); err != nil { // and Top caches the view
		t.Fatal(err)
	}

	recreated(t, h, g, a, leaderboard.Board{ID: id, Shards: 5})
	closedWithin(t, c.done, 10*time.Second, "the old topUpdates subscription")
	closedWithin(t, rc, 10*time.Second, "the old rankUpdates subscription")
	if !end.Deleted() || !rankEnd.Deleted() {
		t.Fatalf("ended by the deletion: top %v, rank %v; want both", end.Deleted(), rankEnd.Deleted())
	}

	// The new board: players on every one of its 5 shards.
	shards := map[int]bool{}
	var onNew string // a player on a shard the old layout lacked
	for i := 0; i < 18 || len(shards) < 5; i++ {
		p := fmt.Sprintf("n%d", i)
		s := leaderboard.ShardOf(p, 5)
		shards[s] = true
		if s >= 3 && onNew == "" {
			onNew = p
		}
		submit(t, a, id, p, float64(100+i))
	}
	ch2, err := h.SubscribeTop(t.Context(), v, 50)
	if err != nil {
		t.Fatal(err)
	}
	c2 := follow(ch2, 50)
	rc2, err := h.SubscribeRank(t.Context(), v, onNew)
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, c2, oracle, v, 5*time.Second)
	waitFor(t, 5*time.Second, "Top of the new board", func() bool {
		ok, _ := topMatchesStore(t, h, oracle, v, 50)
		return ok
	})
	first := nextEntry(t, rc2, 5*time.Second)
	if first.PlayerID != onNew || first.Rank == 0 {
		t.Fatalf("rank of %s on the new board: %+v", onNew, first)
	}
	// Later writes on every shard reach the new subscriptions.
	for s := range 5 {
		for i := 0; ; i++ {
			p := fmt.Sprintf("late%d-%d", s, i)
			if leaderboard.ShardOf(p, 5) == s {
				submit(t, a, id, p, float64(1000+s))
				break
			}
		}
	}
	submit(t, a, id, onNew, 5000)
	waitTop(t, c2, oracle, v, 5*time.Second)
	waitFor(t, 5*time.Second, "Top after later writes", func() bool {
		ok, _ := topMatchesStore(t, h, oracle, v, 50)
		return ok
	})
	for e := nextEntry(t, rc2, 5*time.Second); e.Rank != 1 || e.Score != 5000; e = nextEntry(t, rc2, 5*time.Second) {
	}
	if _, _, _, err := c2.state(); err != nil {
		t.Fatal(err)
	}
}

// An unsharded board deleted and created again with the other order (DESC -> ASC) through another server: the
// old subscriptions end as deleted; new ones follow the new definition (the list in ascending order, and a watched
// rank derived with it).
func TestRecreatedBoardOtherOrderEndsSubscriptions(t *testing.T) {
	cl := redistest.SharedCluster(t)
	prefix := redistest.Prefix(t)
	a := newStore(t, cl.Client(t), prefix)
	hubClient := cl.Client(t)
	g := redistest.NewGate()
	hubClient.AddHook(g)
	h := startHub(t, newStore(t, hubClient, prefix), Config{})
	oracle := newStore(t, cl.Client(t), prefix)

	const id = "flipped"
	createBoard(t, a, leaderboard.Board{ID: id})
	for i := range 6 {
		submit(t, a, id, fmt.Sprintf("p%d", i), float64(i))
	}
	v := leaderboard.View{Board: id}
	end, rankEnd := new(Ending), new(Ending)
	c := follow(must(h.SubscribeTop(WithEnding(t.Context(), end), v, 10)))
	rc, err := h.SubscribeRank(WithEnding(t.Context(), rankEnd), v, "p2")
	if err != nil {
		t.Fatal(err)
	}
	other := new(Ending) // a subscription the test ends itself: not a deletion
	octx, ocancel := context.WithCancel(WithEnding(t.Context(), other))
	och, err := h.SubscribeTop(octx, v, 5)
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, c, a, v, 5*time.Second)
	nextEntry(t, rc, 5*time.Second)
	ocancel()
	closedWithin(t, och, 5*time.Second, "a subscription whose context ended")
	if other.Deleted() {
		t.Fatal("a subscription whose context ended is marked as ended by a deletion")
	}

	recreated(t, h, g, a, leaderboard.Board{ID: id, Order: leaderboard.Asc})
	closedWithin(t, c.done, 10*time.Second, "the old topUpdates subscription")
	closedWithin(t, rc, 10*time.Second, "the old rankUpdates subscription")
	if !end.Deleted() || !rankEnd.Deleted() {
		t.Fatalf("ended by the deletion: top %v, rank %v; want both", end.Deleted(), rankEnd.Deleted())
	}

	for i := range 6 {
		submit(t, a, id, fmt.Sprintf("q%d", i), float64(10*i))
	}
	c2 := follow(must(h.SubscribeTop(t.Context(), v, 10)))
	rc2, err := h.SubscribeRank(t.Context(), v, "q3")
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, c2, oracle, v, 5*time.Second)
	if e := nextEntry(t, rc2, 5*time.Second); e.Rank != 4 || e.Score != 30 {
		t.Fatalf("q3 on the ascending board: %+v, want rank 4", e)
	}
	// Others overtake q3 from below (lower is better now): the watched rank follows.
	submit(t, a, id, "q5", 1)
	submit(t, a, id, "q4", 2)
	for e := nextEntry(t, rc2, 5*time.Second); e.Rank != 6; e = nextEntry(t, rc2, 5*time.Second) {
		if e.Rank > 6 || e.Score != 30 {
			t.Fatalf("q3: %+v", e)
		}
	}
	want, err := oracle.Rank(context.Background(), v, "q3")
	if err != nil || want.Rank != 6 {
		t.Fatalf("oracle rank of q3: %+v %v", want, err)
	}
	waitTop(t, c2, oracle, v, 5*time.Second)
	waitFor(t, 5*time.Second, "Top of the new board", func() bool {
		ok, _ := topMatchesStore(t, h, oracle, v, 10)
		return ok
	})
}
