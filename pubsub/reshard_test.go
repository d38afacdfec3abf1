package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// When a board's slot moves to another node (a reshard with a real slot migration), Redis ends the sharded
// subscription; the hub subscribes on the new owner, re-reads, and the live lists, rank watches and the cached
// top keep up.
func TestReshardKeepsLiveListsMoving(t *testing.T) {
	cl := redistest.Cluster(t)
	rdb := cl.Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{})
	ctx := context.Background()
	createBoard(t, st, leaderboard.Board{ID: "moving"})
	v := leaderboard.View{Board: "moving"}
	submit(t, st, "moving", "a", 1)
	c := follow(must(h.SubscribeTop(t.Context(), v, 10)))
	rc, err := h.SubscribeRank(t.Context(), v, "a")
	if err != nil {
		t.Fatal(err)
	}
	waitTop(t, c, st, v, 3*time.Second)
	nextEntry(t, rc, 3*time.Second)
	if ok, diff := topMatchesStore(t, h, st, v, 10); !ok {
		t.Fatal(diff)
	}
	slot := leaderboard.HashSlot(st.Channel("moving"))
	for round := range 2 { // away and back again
		from, err := cl.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := cl.Addrs[0]
		if to == from {
			to = cl.Addrs[1]
		}
		if err := cl.MoveSlot(ctx, slot, to); err != nil {
			t.Fatal(err)
		}
		if owner, _ := cl.SlotOwner(ctx, slot); owner != to {
			t.Fatalf("slot %d still on %s", slot, owner)
		}
		// A write after the move: it must reach the subscribers through the new node.
		submit(t, st, "moving", "b", float64(10+round))
		waitTop(t, c, st, v, 5*time.Second)
		best := float64(100 + round)
		submit(t, st, "moving", "a", best)
		for e := nextEntry(t, rc, 5*time.Second); e.Score != best || e.Rank != 1; e = nextEntry(t, rc, 5*time.Second) {
		}
		waitFor(t, 5*time.Second, "cached top after the move", func() bool {
			ok, _ := topMatchesStore(t, h, st, v, 10)
			return ok
		})
		submit(t, st, "moving", "c", float64(20+round))
		waitTop(t, c, st, v, 3*time.Second)
		submit(t, st, "moving", "c", float64(-1))
		waitTop(t, c, st, v, 3*time.Second)
	}
}
