package pubsub

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/livelist"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// startHub runs a hub over store until the test ends.
func startHub(t testing.TB, store *leaderboard.Store, cfg Config) *Hub {
	t.Helper()
	h := New(store, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func newStore(t testing.TB, rdb redis.UniversalClient, prefix string) *leaderboard.Store {
	return leaderboard.New(rdb, leaderboard.Config{Prefix: prefix})
}

// hookedStore is a store on the shared standalone Redis through a client of its own, with hooks (counters of
// what the hub sends).
func hookedStore(t testing.TB, hooks ...redis.Hook) *leaderboard.Store {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedStandalone(t).Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	return newStore(t, rdb, redistest.Prefix(t))
}

func createBoard(t testing.TB, st *leaderboard.Store, b leaderboard.Board) {
	t.Helper()
	if _, err := st.CreateBoard(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// topClient rebuilds a list from a subscription the way a client does and checks that versions have no gaps.
type topClient struct {
	first int
	mu    sync.Mutex
	list  []leaderboard.Entry
	size  int64
	ver   int64
	snaps int
	err   error
	done  chan struct{}
	head  chan *TopUpdate // gets the first update
}

func follow(ch <-chan *TopUpdate, first int) *topClient {
	c := &topClient{first: first, done: make(chan struct{}), head: make(chan *TopUpdate, 1)}
	go func() {
		defer close(c.done)
		for u := range ch {
			c.mu.Lock()
			if u.Version != c.ver+1 && c.err == nil {
				c.err = fmt.Errorf("version %d after %d", u.Version, c.ver)
			}
			if c.ver == 0 && !u.Snapshot && c.err == nil {
				c.err = fmt.Errorf("first update is not a snapshot")
			}
			if c.ver == 0 {
				c.head <- u
			}
			c.ver = u.Version
			c.size = u.Size
			if u.Snapshot {
				c.snaps++
			}
			c.list = livelist.Apply(c.list, u.Snapshot, u.Entries, u.Removed, c.first)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *topClient) state() ([]row, int64, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return toRows(c.list), c.ver, c.snaps, c.err
}

// fullRows renders every field a subscriber sees of each row; topPercent is what a client derives from the rank
// and the update's size (it is not resent for rows that did not move when only the size changed).
func fullRows(es []leaderboard.Entry, size int64) []string {
	out := []string{}
	for _, e := range es {
		name := "<none>"
		if e.DisplayName != nil {
			name = *e.DisplayName
		}
		pct := 0.0
		if size > 0 {
			pct = 100 * float64(e.Rank) / float64(size)
		}
		out = append(out, fmt.Sprintf("%s rank=%d tie=%d score=%v approx=%v name=%q meta=%s at=%d pct=%.6f", e.PlayerID,
			e.Rank, e.TieRank, e.Score, e.Approximate, name, e.Metadata, e.UpdatedAt.Unix(), pct))
	}
	return out
}

// waitTop waits until the client's list equals the store's top list (read independently with Store.Top), every
// field and the size included.
func waitTop(t testing.TB, c *topClient, st *leaderboard.Store, v leaderboard.View, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p, err := st.Top(context.Background(), v, 0, c.first)
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		got, size, ver, cerr := fullRows(c.list, c.size), c.size, c.ver, c.err
		c.mu.Unlock()
		if cerr != nil {
			t.Fatal(cerr)
		}
		want := fullRows(p.Entries, p.Size)
		for i, e := range p.Entries { // the store's own topPercent is the one clients must arrive at
			if w := fmt.Sprintf("pct=%.6f", e.TopPercent); !strings.HasSuffix(want[i], w) {
				t.Fatalf("store entry %s: topPercent %v is not 100 * rank / size", e.PlayerID, e.TopPercent)
			}
		}
		if slices.Equal(got, want) && size == p.Size && ver > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client list (version %d, size %d) did not converge to size %d:\n got  %v\n want %v", ver, size,
				p.Size, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// boardWithPlayers starts a hub on a store of its own with board id holding players p0..p<n-1> at scores 0..n-1.
func boardWithPlayers(t testing.TB, id string, n int) (*leaderboard.Store, *Hub) {
	st := hookedStore(t)
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: id})
	for i := range n {
		submit(t, st, id, fmt.Sprintf("p%d", i), float64(i))
	}
	return st, h
}

func submit(t testing.TB, st *leaderboard.Store, board, player string, score float64) {
	t.Helper()
	if _, err := st.Submit(context.Background(), leaderboard.Submission{Board: board, Player: player,
		Score: score}); err != nil {
		t.Error(err)
	}
}

// TestConvergesAfterConcurrentWrites: every kind of write, several subscribers with different first; the lists
// rebuilt from snapshot + diffs equal store.Top at the end, versions have no gaps, and Top serves the same list.
func TestConvergesAfterConcurrentWrites(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, tg.Client, redistest.Prefix(t))
			h := startHub(t, st, Config{})
			boards := []leaderboard.Board{
				{ID: "best", Mode: leaderboard.Best},
				{ID: "sum", Mode: leaderboard.Sum},
				{ID: "latest", Mode: leaderboard.Latest, Order: leaderboard.Asc},
				{ID: "exact", Mode: leaderboard.Best, ExactTop: 20},
			}
			ctx := t.Context()
			var clients []*topClient
			var views []leaderboard.View
			for _, b := range boards {
				createBoard(t, st, b)
				for _, first := range []int{5, 10, 100} {
					ch, err := h.SubscribeTop(ctx, leaderboard.View{Board: b.ID}, first)
					if err != nil {
						t.Fatal(err)
					}
					clients = append(clients, follow(ch, first))
					views = append(views, leaderboard.View{Board: b.ID})
				}
			}
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					for i := range 150 {
						b := boards[r.IntN(len(boards))]
						player := fmt.Sprintf("p%d", r.IntN(120))
						score := float64(r.IntN(50)) // few distinct scores: many ties
						switch {
						case b.Mode == leaderboard.Sum:
							score -= 20 // deltas up and down
						case i%25 == 0:
							if _, err := st.RemovePlayer(ctx, b.ID, player); err != nil {
								t.Error(err)
							}
							continue
						case i%30 == 0:
							var subs []leaderboard.Submission
							for k := range 20 {
								subs = append(subs, leaderboard.Submission{Board: b.ID,
									Player: fmt.Sprintf("p%d", r.IntN(120)), Score: float64(k)})
							}
							if _, err := st.SubmitMany(ctx, subs); err != nil {
								t.Error(err)
							}
							continue
						}
						submit(t, st, b.ID, player, score)
					}
				}()
			}
			wg.Wait()
			for i, c := range clients {
				waitTop(t, c, st, views[i], 3*time.Second)
			}
			// Top from the hub's cache equals the store's.
			for _, b := range boards {
				v := leaderboard.View{Board: b.ID}
				deadline := time.Now().Add(2 * time.Second)
				for {
					got, err := h.Top(ctx, v, 3, 20)
					if err != nil {
						t.Fatal(err)
					}
					want, _ := st.Top(ctx, v, 3, 20)
					if slices.Equal(toRows(got.Entries), toRows(want.Entries)) && got.Size == want.Size {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("hub Top %v, store %v", toRows(got.Entries), toRows(want.Entries))
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

func TestSubscribeErrors(t *testing.T) {
	rdb := redistest.SharedStandalone(t).Client(t)
	st := newStore(t, rdb, redistest.Prefix(t))
	h := startHub(t, st, Config{})
	createBoard(t, st, leaderboard.Board{ID: "b", Windows: []leaderboard.Window{leaderboard.Daily}})
	ctx := t.Context()
	for _, first := range []int{0, -1, 101} {
		if _, err := h.SubscribeTop(ctx, leaderboard.View{Board: "b"}, first); leaderboard.ErrorCode(err) !=
			leaderboard.Invalid {
			t.Errorf("first %d: got %v, want BAD_USER_INPUT", first, err)
		}
	}
	if _, err := h.SubscribeTop(ctx, leaderboard.View{Board: "nope"}, 10); leaderboard.ErrorCode(err) !=
		leaderboard.NotFound {
		t.Errorf("unknown board: got %v, want NOT_FOUND", err)
	}
	if _, err := h.SubscribeRank(ctx, leaderboard.View{Board: "nope"}, "p"); leaderboard.ErrorCode(err) !=
		leaderboard.NotFound {
		t.Errorf("unknown board: got %v, want NOT_FOUND", err)
	}
	if _, err := h.SubscribeTop(ctx, leaderboard.View{Board: "b", Window: leaderboard.Weekly}, 10); leaderboard.ErrorCode(err) != leaderboard.Invalid {
		t.Errorf("missing window: got %v, want BAD_USER_INPUT", err)
	}
	if _, err := h.SubscribeRank(ctx, leaderboard.View{Board: "b"}, ""); leaderboard.ErrorCode(err) !=
		leaderboard.Invalid {
		t.Errorf("empty player: got %v, want BAD_USER_INPUT", err)
	}
}
