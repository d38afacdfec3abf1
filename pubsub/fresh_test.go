package pubsub

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// waitFor polls cond every 10 ms until it holds or within has passed.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// topMatchesStore reports whether the hub's Top (served from its cache when it can) equals an independent read,
// every field included.
func topMatchesStore(t testing.TB, h *Hub, st *leaderboard.Store, v leaderboard.View, n int) (bool, string) {
	t.Helper()
	ctx := context.Background()
	got, err := h.Top(ctx, v, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.Top(ctx, v, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	g, w := fullRows(got.Entries, got.Size), fullRows(want.Entries, want.Size)
	for i := range got.Entries { // Top returns topPercent itself; it must be the current one
		if i < len(want.Entries) && got.Entries[i].TopPercent != want.Entries[i].TopPercent {
			return false, fmt.Sprintf("topPercent of %s: %v, want %v", got.Entries[i].PlayerID, got.Entries[i].TopPercent,
				want.Entries[i].TopPercent)
		}
	}
	if got.Size != want.Size || strings.Join(g, "\n") != strings.Join(w, "\n") {
		return false, fmt.Sprintf("size %d, want %d\n got  %v\n want %v", got.Size, want.Size, g, w)
	}
	return true, ""
}

// A submit that changes only the display name or the metadata reaches the cached top list, topUpdates and
// rankUpdates.
func TestNameOnlyChangesArePublished(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			st := newStore(t, tg.Client, redistest.Prefix(t))
			h := startHub(t, st, Config{})
			createBoard(t, st, leaderboard.Board{ID: "names", Windows: []leaderboard.Window{leaderboard.AllTime,
				leaderboard.Daily}})
			v := leaderboard.View{Board: "names"}
			name := func(p, n, meta string) {
				t.Helper()
				if _, err := st.Submit(context.Background(), leaderboard.Submission{Board: "names", Player: p, Score: 10,
					DisplayName: &n, Metadata: []byte(meta)}); err != nil {
					t.Fatal(err)
				}
			}
			name("ann", "Ann", `{"team":"red"}`)
			name("bob", "Bob", `{}`)
			c := follow(must(h.SubscribeTop(t.Context(), v, 10)))
			rc, err := h.SubscribeRank(t.Context(), v, "ann")
			if err != nil {
				t.Fatal(err)
			}
			waitTop(t, c, st, v, 2*time.Second)
			if e := nextEntry(t, rc, 2*time.Second); *e.DisplayName != "Ann" {
				t.Fatalf("first rank entry %+v", e)
			}
			if ok, diff := topMatchesStore(t, h, st, v, 10); !ok { // now cached
				t.Fatal(diff)
			}
			_, before, _, _ := c.state()
			name("ann", "Annie", `{"team":"blue"}`) // same score: only the name and metadata change
			waitTop(t, c, st, v, 2*time.Second)
			if _, after, _, _ := c.state(); after != before+1 {
				t.Fatalf("versions %d -> %d, want one diff", before, after)
			}
			e := nextEntry(t, rc, 2*time.Second)
			if *e.DisplayName != "Annie" || string(e.Metadata) != `{"team":"blue"}` || e.Rank != 1 {
				t.Fatalf("rank update after a rename: %+v", e)
			}
			if hs := h.Stats(); hs.RankUpdates < 2 || hs.Snapshots < 1 || hs.Diffs < 1 || hs.StuckDropped != 0 {
				t.Fatalf("hub stats %+v: want the two rank updates, a snapshot and a diff counted", hs)
			}
			waitFor(t, 2*time.Second, "cached top shows the new name", func() bool {
				ok, _ := topMatchesStore(t, h, st, v, 10)
				return ok
			})
		})
	}
}

// Joins below the top 100 change only the size; it reaches the cached top list (size and topPercent) and
// topUpdates within about a second, also for the last join of a burst.
func TestSizeChangesBelowTheTop(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t, tg.Client, redistest.Prefix(t))
			h := startHub(t, st, Config{})
			createBoard(t, st, leaderboard.Board{ID: "grow"})
			v := leaderboard.View{Board: "grow"}
			join := func(from, to int) {
				var subs []leaderboard.Submission
				for i := from; i < to; i++ {
					subs = append(subs, leaderboard.Submission{Board: "grow", Player: fmt.Sprint("p", i), Score: float64(100000 - i)})
				}
				for len(subs) > 0 {
					n := min(len(subs), leaderboard.MaxBulk)
					if _, err := st.SubmitMany(ctx, subs[:n]); err != nil {
						t.Fatal(err)
					}
					subs = subs[n:]
				}
			}
			join(0, 100)
			c := follow(must(h.SubscribeTop(t.Context(), v, 10)))
			waitTop(t, c, st, v, 2*time.Second)
			if ok, diff := topMatchesStore(t, h, st, v, 10); !ok {
				t.Fatal(diff)
			}
			for _, burst := range [][2]int{{100, 1000}, {1000, 1001}, {1001, 1003}} {
				join(burst[0], burst[1]) // all below rank 100
				start := time.Now()
				waitTop(t, c, st, v, 1500*time.Millisecond)
				waitFor(t, 1500*time.Millisecond-time.Since(start), "cached top with the new size", func() bool {
					ok, _ := topMatchesStore(t, h, st, v, 10)
					return ok
				})
				c.mu.Lock()
				size := c.size
				c.mu.Unlock()
				if size != int64(burst[1]) {
					t.Fatalf("subscription size %d, want %d", size, burst[1])
				}
			}
		})
	}
}

// versionReads counts the reads of a board's event version (one per full re-read of a board).
type versionReads struct{ n atomic.Int64 }

func (c *versionReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *versionReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) == 4 && strings.EqualFold(cmd.Name(), "hmget") && args[2] == "ep" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *versionReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Under steady writes the hub reads the board's lists as they change, but re-reads everything (the version
// check) only at the start: events published before a full re-read are not mistaken for lost ones.
func TestSteadyWritesNeedNoFullRereads(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	reads := &versionReads{}
	rdb.AddHook(reads)
	prefix := redistest.Prefix(t)
	st := newStore(t, rdb, prefix)
	writer := newStore(t, srv.Client(t), prefix)
	h := startHub(t, st, Config{MaxUpdateRate: 20})
	createBoard(t, writer, leaderboard.Board{ID: "steady"})
	v := leaderboard.View{Board: "steady"}
	c := follow(must(h.SubscribeTop(t.Context(), v, 10)))
	waitTop(t, c, st, v, 2*time.Second)
	base := reads.n.Load()
	for i := range 300 { // about 150 changes a second for two seconds, every one in the top 10
		submit(t, writer, "steady", fmt.Sprint("p", i%20), float64(i))
		time.Sleep(6 * time.Millisecond)
	}
	waitTop(t, c, st, v, 2*time.Second)
	if n := reads.n.Load() - base; n > 1 {
		t.Fatalf("%d full re-reads under steady writes, want at most 1", n)
	}
	if _, ver, _, _ := c.state(); ver < 10 {
		t.Fatalf("only %d updates", ver)
	}
}

// A writer that calls Changed and then asks Top sees its own write, however the hub's refreshes interleave.
func TestReadYourWrites(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{MaxUpdateRate: 100})
	createBoard(t, st, leaderboard.Board{ID: "ryw"})
	v := leaderboard.View{Board: "ryw"}
	if _, err := h.Top(t.Context(), v, 0, 10); err != nil { // cache the view
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var score atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				s := float64(score.Add(1))
				p := fmt.Sprint("w", g)
				if _, err := st.Submit(context.Background(), leaderboard.Submission{Board: "ryw", Player: p, Score: s}); err != nil {
					t.Error(err)
					return
				}
				h.Changed("ryw")
				page, err := h.Top(context.Background(), v, 0, 10)
				if err != nil {
					t.Error(err)
					return
				}
				found := false
				for _, e := range page.Entries {
					found = found || (e.PlayerID == p && e.Score >= s)
				}
				if !found {
					t.Errorf("%s does not see its score %v in %+v", p, s, page.Entries)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A view that only Top used is dropped after ViewIdle, with its board's goroutine and subscription.
func TestIdleViewsAreDropped(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{ViewIdle: 300 * time.Millisecond, PeriodCheck: 50 * time.Millisecond})
	for i := range 20 {
		createBoard(t, st, leaderboard.Board{ID: fmt.Sprint("idle", i), Windows: []leaderboard.Window{leaderboard.Daily}})
	}
	// Warm up: the process-wide subscription connection and its reader stay once opened.
	if _, err := h.Top(t.Context(), leaderboard.View{Board: "idle0"}, 0, 10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "warm-up", func() bool { return h.boardCount() == 0 })
	time.Sleep(100 * time.Millisecond) // the warm-up board's loop returns after unregistering
	base := runtime.NumGoroutine()
	for i := range 20 {
		for _, p := range []string{"", "2030-01-01", "2030-01-02"} { // the current period and two past ones
			if _, err := h.Top(t.Context(), leaderboard.View{Board: fmt.Sprint("idle", i), Period: p}, 0, 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := h.boardCount(); n != 20 {
		t.Fatalf("%d boards watched after Top, want 20", n)
	}
	waitFor(t, 5*time.Second, "idle views dropped", func() bool { return h.boardCount() == 0 })
	waitFor(t, 5*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
	// A view in use stays.
	v := leaderboard.View{Board: "idle0"}
	for range 10 {
		if _, err := h.Top(t.Context(), v, 0, 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := h.boardCount(); n != 1 {
		t.Fatalf("a view read every 100 ms was dropped (%d boards)", n)
	}
}

// boardCount returns how many boards the hub watches.
func (h *Hub) boardCount() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.boards)
}
