package pubsub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// On a cluster the hub holds one sharded-subscription connection per primary, however many boards (slots) it
// watches; when those connections break, it subscribes every channel again slot by slot (go-redis's own
// resubscription sends them all in one SSUBSCRIBE, which Redis refuses across slots) and every board moves again.
func TestClusterConnectionsPerPrimary(t *testing.T) {
	cl := redistest.Cluster(t)
	st := newStore(t, cl.Client(t), redistest.Prefix(t))
	h := startHub(t, st, Config{})
	ctx := context.Background()

	const boards = 60
	owners := map[string]int{} // primary -> boards on it
	var ids []string
	var clients []*topClient
	for i := range boards {
		id := fmt.Sprintf("node-board-%d", i)
		owner, err := cl.SlotOwner(ctx, leaderboard.HashSlot(st.Channel(id)))
		if err != nil {
			t.Fatal(err)
		}
		owners[owner]++
		ids = append(ids, id)
		createBoard(t, st, leaderboard.Board{ID: id})
		clients = append(clients, follow(must(h.SubscribeTop(t.Context(), leaderboard.View{Board: id}, 10))))
	}
	if len(owners) != 3 {
		t.Fatalf("the boards are on %d primaries, want all 3: %v", len(owners), owners)
	}
	moveAll := func(round int) {
		t.Helper()
		for i, id := range ids {
			submit(t, st, id, fmt.Sprintf("p%d-%d", round, i), float64(round*1000+i))
		}
		for i, c := range clients {
			waitTop(t, c, st, leaderboard.View{Board: ids[i]}, 10*time.Second)
		}
	}
	moveAll(1)
	h.listenMu.Lock()
	nconns, nchans := len(h.conns), len(h.chanConn)
	h.listenMu.Unlock()
	if nconns != 3 || nchans != boards {
		t.Fatalf("%d subscription connections for %d channels, want 3 (one per primary) for %d", nconns, nchans, boards)
	}

	// Break every subscription connection of the cluster.
	for _, addr := range cl.Addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		n, err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Int()
		c.Close()
		if err != nil || n == 0 {
			t.Fatalf("CLIENT KILL TYPE pubsub on %s: %d, %v", addr, n, err)
		}
	}
	for round := 2; round <= 3; round++ {
		moveAll(round)
	}
	h.listenMu.Lock()
	nconns, nchans = len(h.conns), len(h.chanConn)
	h.listenMu.Unlock()
	if nconns != 3 || nchans != boards {
		t.Fatalf("after the reconnect: %d connections for %d channels, want 3 for %d", nconns, nchans, boards)
	}
}
