package pubsub

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestRankWatchesDerived: on a board without exactTop, watched ranks follow other players' moves from the change
// events alone (rank.go), and after every write each watcher holds exactly the entry Store.Rank reads (every
// field: rank, tie rank with many equal scores, score, updatedAt, name, metadata, and topPercent in the updates a
// write brings), through 300 random
// writes: new players and score changes up and down (LATEST), ties, batches of several players in one script call
// (one event, several changes), removals, name-only changes, and players with no score yet. Redis is asked for
// the ranks of watched players only for their own changes (and the first read): the hub's rank reads cover at
// most one player per own change besides the first reads, while the derived updates are many.
func TestRankWatchesDerived(t *testing.T) {
	reads := &rankReads{}
	st := hookedStore(t, reads)
	oracle := hookedStore(t) // reads of the test's own, not counted
	oracle = newStore(t, oracle.Redis(), st.Prefix())
	h := startHub(t, st, Config{RankVerify: time.Hour, MaxUpdateRate: 200})
	ctx := t.Context()
	for _, order := range []leaderboard.Order{leaderboard.Desc, leaderboard.Asc} {
		board := "derive-" + string(order)
		createBoard(t, st, leaderboard.Board{ID: board, Mode: leaderboard.Latest, Order: order})
		v := leaderboard.View{Board: board}
		rnd := rand.New(rand.NewPCG(7, uint64(len(order))))
		player := func() string { return fmt.Sprint("p", rnd.IntN(40)) }
		score := func() float64 { return float64(rnd.IntN(12)) } // few distinct scores: many ties
		for i := range 25 {
			submit(t, st, board, fmt.Sprint("p", i), score())
		}
		const watched = 16 // p0..p15 and two players with no score yet
		names := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11", "p12", "p13",
			"nobody", "p39"}
		chans := make([]<-chan *leaderboard.Entry, watched)
		latest := make([]*leaderboard.Entry, watched)
		for i, p := range names {
			ch, err := h.SubscribeRank(ctx, v, p)
			if err != nil {
				t.Fatal(err)
			}
			chans[i] = ch
			latest[i] = nextEntry(t, ch, 5*time.Second)
		}
		reads.mu.Lock()
		reads.sizes = nil
		reads.mu.Unlock()
		derivedBefore := h.Stats().RankDerived
		own := 0
		watchedSet := map[string]bool{}
		for _, p := range names {
			watchedSet[p] = true
		}
		name := "renamed"
		for op := range 300 {
			var touched []string
			switch k := rnd.IntN(10); {
			case k < 6: // one submission
				p := player()
				touched = append(touched, p)
				submit(t, st, board, p, score())
			case k < 8: // a batch: one script call, one event with several changes
				var subs []leaderboard.Submission
				for range 2 + rnd.IntN(4) {
					p := player()
					touched = append(touched, p)
					subs = append(subs, leaderboard.Submission{Board: board, Player: p, Score: score()})
				}
				if _, err := st.SubmitMany(ctx, subs); err != nil {
					t.Fatal(err)
				}
			case k < 9: // a removal
				p := player()
				touched = append(touched, p)
				if _, err := st.RemovePlayer(ctx, board, p); err != nil {
					t.Fatal(err)
				}
			default: // a new name only: the same score again
				p := player()
				e, err := oracle.Rank(ctx, v, p)
				if err != nil {
					t.Fatal(err)
				}
				if e != nil {
					touched = append(touched, p)
					if _, err := st.Submit(ctx, leaderboard.Submission{Board: board, Player: p, Score: e.Score,
						DisplayName: &name}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, p := range touched {
				if watchedSet[p] {
					own++
				}
			}
			// Every watcher converges on what Store.Rank reads now (no score: rank 0). An update comes when the
			// entry changes but for topPercent (the contract: when the rank or score changes), so topPercent must
			// be the current one only in an update this write brought.
			deadline := time.Now().Add(5 * time.Second)
			for i, p := range names {
				want, err := oracle.Rank(ctx, v, p)
				if err != nil {
					t.Fatal(err)
				}
				if want == nil {
					want = &leaderboard.Entry{PlayerID: p}
				}
				fresh := false
				for {
					got := *latest[i]
					if !fresh {
						got.TopPercent = want.TopPercent
					}
					if reflect.DeepEqual(&got, want) {
						break
					}
					select {
					case e := <-chans[i]:
						latest[i], fresh = e, true
					case <-time.After(time.Until(deadline)):
						t.Fatalf("%s, write %d (%v): watcher of %s holds %+v, Store.Rank reads %+v", order, op, touched,
							p, latest[i], want)
					}
				}
			}
		}
		reads.mu.Lock()
		total := 0
		for _, n := range reads.sizes {
			total += n
		}
		reads.mu.Unlock()
		derived := h.Stats().RankDerived - derivedBefore
		if total > own || derived < 300 {
			t.Fatalf("%s: rank reads covered %d players for %d own changes of watched players; %d entries derived",
				order, total, own, derived)
		}
		t.Logf("%s: rank reads covered %d players for %d own changes; %d entries derived", order, total, own, derived)
	}
}

// TestRankWatchesVerified: however well the events keep watched ranks, every watch is read again once per
// Config.RankVerify (default 30 s, the README's figure).
func TestRankWatchesVerified(t *testing.T) {
	var c Config
	if c.normalize(); c.RankVerify != 30*time.Second {
		t.Fatalf("default RankVerify %v, want 30s", c.RankVerify)
	}
	reads := &rankReads{}
	st := hookedStore(t, reads)
	h := startHub(t, st, Config{RankVerify: 200 * time.Millisecond})
	createBoard(t, st, leaderboard.Board{ID: "verify"})
	submit(t, st, "verify", "a", 1)
	ch, err := h.SubscribeRank(t.Context(), leaderboard.View{Board: "verify"}, "a")
	if err != nil {
		t.Fatal(err)
	}
	nextEntry(t, ch, 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		reads.mu.Lock()
		n := len(reads.sizes)
		reads.mu.Unlock()
		if n >= 3 { // the first read and two verifications, with nothing written
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rank reads in 10 s with RankVerify 200ms", n)
		}
		submit(t, st, "verify", "other", 0) // a change below: the board's loop runs, nothing moves "a"
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOwnWriteReadsListsOnce: a write of this process (Hub.ChangedAt, with the write's event) has the board's
// lists read once, whichever comes first: the event (ChangedAt then sees it taken) or ChangedAt (the lists are
// read with the event version they follow, and the event arriving after is no news to them). A second read took
// the board's pacing slot from the next write. The watchers still take the event: a watched player the write
// passed is moved.
func TestOwnWriteReadsListsOnce(t *testing.T) {
	st, h := boardWithPlayers(t, "own", 5)
	ctx := t.Context()
	v := leaderboard.View{Board: "own"}
	tops, err := h.SubscribeTop(ctx, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	follow(tops, 10)
	ranks, err := h.SubscribeRank(ctx, v, "p2")
	if err != nil {
		t.Fatal(err)
	}
	if e := nextEntry(t, ranks, 5*time.Second); e.Rank != 3 {
		t.Fatalf("p2 first at rank %d, want 3", e.Rank)
	}
	waitFor(t, 5*time.Second, "the lists read", func() bool { return h.Stats().ListRows > 0 })
	time.Sleep(500 * time.Millisecond) // the first reads settle
	for i := range 3 {
		before := h.Stats().ListRows
		res, err := st.Submit(ctx, leaderboard.Submission{Board: "own", Player: fmt.Sprint("new", i),
			Score: float64(100 + i)}) // takes rank 1
		if err != nil || res.EventVersion == 0 {
			t.Fatalf("write %d: %+v %v, want the event version", i, res, err)
		}
		h.ChangedAt("own", res.EventEpoch, res.EventVersion) // as the resolver does
		if e := nextEntry(t, ranks, 5*time.Second); e.Rank != int64(4+i) {
			t.Fatalf("write %d: p2 at rank %d, want %d", i, e.Rank, 4+i)
		}
		time.Sleep(500 * time.Millisecond) // five refresh intervals: a second read would have come
		rows := int64(h.Stats().ListRows - before)
		if want := int64(6 + i); rows != want { // one read of the whole board: 6, 7, 8 players
			t.Fatalf("write %d: the lists' reads brought %d rows, want one read of %d", i, rows, want)
		}
	}
}
