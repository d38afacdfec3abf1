package pubsub

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// rankReads records how many players each rank read (the ranks script) asked for.
type rankReads struct {
	mu    sync.Mutex
	sizes []int
}

func (c *rankReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rankReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// FCALL <library>_ranks 1 <key> <definition SHA-1> <window> <period> <fields> <player>...
		if a := cmd.Args(); len(a) > 8 && strings.EqualFold(fmt.Sprint(a[0]), "fcall") &&
			strings.HasSuffix(fmt.Sprint(a[1]), "_ranks") {
			c.mu.Lock()
			c.sizes = append(c.sizes, len(a)-8)
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (c *rankReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRankReadsInBatches: a board's rank watchers are read RankReadBatch players per script call (a long script
// blocks every write behind it), and every watcher still gets its new rank, as Store.Rank reads it. On an
// exactTop board, whose moved ranks are read (on others they are derived from the events: TestRankWatchesDerived).
func TestRankReadsInBatches(t *testing.T) {
	var c Config
	if c.normalize(); c.RankReadBatch != 100 { // the README's figure
		t.Fatalf("default RankReadBatch %d, want 100", c.RankReadBatch)
	}
	reads := &rankReads{}
	st := hookedStore(t, reads)
	const batch, watchers = 7, 20
	h := startHub(t, st, Config{RankReadBatch: batch})
	createBoard(t, st, leaderboard.Board{ID: "rb", ExactTop: 1000}) // exactTop: moved ranks are read, not derived (rank.go)
	ctx := t.Context()
	v := leaderboard.View{Board: "rb"}
	chans := make([]<-chan *leaderboard.Entry, watchers)
	for i := range watchers {
		submit(t, st, "rb", fmt.Sprintf("w%02d", i), float64(i+1))
	}
	for i := range watchers {
		ch, err := h.SubscribeRank(ctx, v, fmt.Sprintf("w%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
		if e := nextEntry(t, ch, 5*time.Second); e.Rank != int64(watchers-i) {
			t.Fatalf("w%02d: first entry %+v, want rank %d", i, e, watchers-i)
		}
	}
	reads.mu.Lock()
	reads.sizes = nil
	reads.mu.Unlock()
	submit(t, st, "rb", "leader", 1000) // every watcher moves down one rank
	got := make([]*leaderboard.Entry, watchers)
	for i, ch := range chans {
		got[i] = nextEntry(t, ch, 5*time.Second)
	}
	reads.mu.Lock()
	sizes := append([]int(nil), reads.sizes...) // before the oracle's own reads below
	reads.mu.Unlock()
	total := 0
	for _, n := range sizes {
		if n > batch {
			t.Fatalf("a rank read asked for %d players, more than RankReadBatch %d (reads: %v)", n, batch, sizes)
		}
		total += n
	}
	if total < watchers {
		t.Fatalf("rank reads after the change covered %d players, want all %d (reads: %v)", total, watchers, sizes)
	}
	for i, e := range got {
		player := fmt.Sprintf("w%02d", i)
		want, err := st.Rank(ctx, v, player)
		if err != nil {
			t.Fatal(err)
		}
		if e.PlayerID != player || e.Rank != want.Rank || e.TieRank != want.TieRank || e.Score != want.Score ||
			e.TopPercent != want.TopPercent || !e.UpdatedAt.Equal(want.UpdatedAt) || e.Rank != int64(watchers-i+1) {
			t.Fatalf("%s: got %+v, want %+v", player, e, want)
		}
	}
}
