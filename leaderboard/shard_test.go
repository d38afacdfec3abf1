package leaderboard_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// shardStore returns a store with a fresh prefix over rdb whose clock is a test clock.
func shardStore(t *testing.T, rdb redis.UniversalClient) (*lb.Store, *testClock) {
	clock := &testClock{t: time.Date(2031, 5, 6, 12, 0, 0, 0, time.UTC)}
	return lb.New(rdb, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now}), clock
}

// seenShardStore is shardStore on a client of its own to the shared standalone Redis, whose commands see hears
// (a redistest.Commands hook): tests that count what a read or submission sends.
func seenShardStore(t *testing.T, see func(redis.Cmder)) (*lb.Store, *testClock) {
	srv := redistest.SharedStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(redistest.Commands{See: see})
	return shardStore(t, rdb)
}

// onShards returns, for each shard of a board of the given shards, n player ids that ShardOf puts there.
func onShards(t *testing.T, tag string, shards, n int) [][]string {
	t.Helper()
	out := make([][]string, shards)
	left := shards * n
	for i := 0; left > 0; i++ {
		if i > 1_000_000 {
			t.Fatalf("ShardOf(_, %d): no %d players on every shard among a million ids: %v", shards, n, out)
		}
		id := fmt.Sprintf("%s%d", tag, i)
		sh := lb.ShardOf(id, shards)
		if sh < 0 || sh >= shards {
			t.Fatalf("ShardOf(%q, %d) = %d", id, shards, sh)
		}
		if len(out[sh]) < n {
			out[sh] = append(out[sh], id)
			left--
		}
	}
	return out
}

func wantTop(t *testing.T, s *lb.Store, v lb.View, want []string) {
	t.Helper()
	if got := topIDs(t, s, v, len(want)+5); !slices.Equal(got, want) {
		t.Fatalf("top %v, want %v", got, want)
	}
}

// TestShardedFairTiesAcrossShards: equal scores rank by first arrival board-wide, whichever shards the players
// live on, although one shard has taken hundreds of arrivals before (per-shard counters would put a later arrival
// on a quiet shard first). Single submits arrive in call order, the items of one SubmitMany call in input order;
// resubmitting the same score keeps the position; leaving the score and coming back, and removal and re-entry,
// are new arrivals; Rank, TieRank, Around and Friends agree.
func TestShardedFairTiesAcrossShards(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, shards := range []int{3, 7, 16} {
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			t.Run(fmt.Sprintf("S=%d/%s", shards, order), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s, _ := shardStore(t, rdb)
				b := mustBoard(t, s, lb.Board{ID: "ties", Order: order, Mode: lb.Latest, Shards: shards})
				v := lb.View{Board: b.ID}
				tie, low, high := 100.0, 50.0, 200.0
				if order == lb.Asc {
					tie, low, high = 100, 150, 10
				}
				sub := func(p string, score float64) *lb.Result {
					t.Helper()
					return mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: score})
				}
				ps := onShards(t, "t", shards, 4)
				// Shard 0 takes 300 arrivals, the last shard 40, the others none, all below the tie.
				warm := ps[0][3]
				for i := range 300 {
					sub(warm, low-float64(i%7))
				}
				sub(warm, low)
				for i := range 40 {
					sub(ps[shards-1][3], low-float64(i%5))
				}
				sub(ps[shards-1][3], low)
				// The busy shard first, then quiet ones, then the busy one again.
				b0, a1, c2, d0 := ps[0][0], ps[1][0], ps[2][0], ps[0][1]
				for i, p := range []string{b0, a1, c2, d0} {
					if r := sub(p, tie); r.Entry.Rank != int64(i+1) || r.Entry.TieRank != 1 {
						t.Fatalf("%s (shard %d) is arrival %d at %v: rank %d tieRank %d", p, lb.ShardOf(p, shards),
							i+1, tie, r.Entry.Rank, r.Entry.TieRank)
					}
				}
				wantTop(t, s, v, []string{b0, a1, c2, d0, warm, ps[shards-1][3]})
				for i, p := range []string{b0, a1, c2, d0} {
					e, err := s.Rank(ctx, v, p)
					if err != nil || e == nil || e.Rank != int64(i+1) || e.TieRank != 1 || e.Score != tie {
						t.Fatalf("Rank(%s) = %+v, %v; want rank %d tieRank 1", p, e, err, i+1)
					}
				}
				// The items of one SubmitMany call arrive in input order, across shards.
				x, y, z := ps[2][1], ps[1][1], ps[0][2]
				outs, err := s.SubmitMany(ctx, []lb.Submission{{Board: b.ID, Player: x, Score: high},
					{Board: b.ID, Player: y, Score: high}, {Board: b.ID, Player: z, Score: high}})
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range outs {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
				}
				wantTop(t, s, v, []string{x, y, z, b0, a1, c2, d0, warm, ps[shards-1][3]})
				// Same score again: the position is kept.
				if r := sub(b0, tie); r.Updated || r.Entry.Rank != 4 {
					t.Fatalf("%s resubmits its score: updated %v rank %d; want false 4", b0, r.Updated, r.Entry.Rank)
				}
				// Leaving the score and coming back is a new arrival.
				sub(b0, low)
				if r := sub(b0, tie); r.Entry.Rank != 7 || r.Entry.TieRank != 4 {
					t.Fatalf("%s back at the tie: rank %d tieRank %d; want 7 4", b0, r.Entry.Rank, r.Entry.TieRank)
				}
				wantTop(t, s, v, []string{x, y, z, a1, c2, d0, b0, warm, ps[shards-1][3]})
				// Removal and re-entry is a new arrival.
				if ok, err := s.RemovePlayer(ctx, b.ID, a1); err != nil || !ok {
					t.Fatalf("RemovePlayer(%s) = %v, %v", a1, ok, err)
				}
				wantTop(t, s, v, []string{x, y, z, c2, d0, b0, warm, ps[shards-1][3]})
				sub(a1, tie)
				want := []string{x, y, z, c2, d0, b0, a1, warm, ps[shards-1][3]}
				wantTop(t, s, v, want)
				if n, err := s.Size(ctx, v); err != nil || n != int64(len(want)) {
					t.Fatalf("Size = %d, %v; want %d", n, err, len(want))
				}
				// Around and Friends follow the same order.
				got, err := s.Around(ctx, v, d0, 2)
				if err != nil {
					t.Fatal(err)
				}
				if ids := entryIDs(got); !slices.Equal(ids, []string{z + "@3", c2 + "@4", d0 + "@5", b0 + "@6", a1 + "@7"}) {
					t.Fatalf("Around(%s, 2) = %v", d0, ids)
				}
				fr, err := s.Friends(ctx, v, a1, []string{b0, x, c2, "nobody", warm})
				if err != nil {
					t.Fatal(err)
				}
				if ids := entryIDs(fr); !slices.Equal(ids, []string{x + "@1", c2 + "@4", b0 + "@6", a1 + "@7", warm + "@8"}) {
					t.Fatalf("Friends = %v", ids)
				}
				for _, e := range fr {
					wantTie := map[string]int64{x: 1, c2: 4, b0: 4, a1: 4, warm: 8}[e.PlayerID]
					if e.TieRank != wantTie {
						t.Fatalf("Friends: %s tieRank %d, want %d", e.PlayerID, e.TieRank, wantTie)
					}
				}
			})
		}
	}
}

// TestShardedTiesAtTokenBoundaries: ties across shards keep their order of arrival where the board-wide arrival
// numbers change their encoded length (62^3: four base-62 digits) and where the records change format (10^15).
func TestShardedTiesAtTokenBoundaries(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	for _, start := range []int64{62*62*62 - 3, 1_000_000_000_000_000 - 3} {
		s, _ := shardStore(t, rdb)
		const shards = 7
		b := mustBoard(t, s, lb.Board{ID: "boundary", Shards: shards, Mode: lb.Latest})
		if err := lb.SetBoardArrivals(ctx, s, b.ID, start); err != nil {
			t.Fatal(err)
		}
		ps := onShards(t, "z", shards, 2)
		order := []string{ps[3][0], ps[1][0], ps[5][0], ps[0][0], ps[6][0], ps[3][1]}
		for i, p := range order {
			if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: 5}); r.Entry.Rank != int64(i+1) {
				t.Fatalf("arrivals from %d: %s is %d-th at the tie, rank %d", start+1, p, i+1, r.Entry.Rank)
			}
		}
		if got := topIDs(t, s, lb.View{Board: b.ID}, 10); !slices.Equal(got, order) {
			t.Fatalf("arrivals from %d: top %v, want %v", start+1, got, order)
		}
		for i, p := range order {
			if e, err := s.Rank(ctx, lb.View{Board: b.ID}, p); err != nil || e == nil || e.Rank != int64(i+1) {
				t.Fatalf("arrivals from %d: Rank(%s) = %+v, %v; want %d", start+1, p, e, err, i+1)
			}
		}
	}
}

// TestShardedTiesAcrossStores: one goroutine alternating between two stores (two processes, each with its own
// client) submits equal scores on a sharded board: they arrive in call order, whichever store made the call
// (a counter that each store took in batches of its own would put one store's later calls first).
func TestShardedTiesAcrossStores(t *testing.T) {
	t.Parallel()
	cl := shardClient(t)
	s1, clock := shardStore(t, cl)
	var cl2 redis.UniversalClient
	if v, ok := cl.(*redis.ClusterClient); ok {
		cl2 = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{v.Options().Addrs[0]}})
	} else {
		cl2 = redis.NewClient(&redis.Options{Addr: cl.(*redis.Client).Options().Addr})
	}
	t.Cleanup(func() { cl2.Close() })
	s2 := lb.New(cl2, lb.Config{Prefix: s1.Prefix(), Clock: clock.Now})
	ctx := context.Background()
	const shards = 7
	b := mustBoard(t, s1, lb.Board{ID: "two stores", Shards: shards})
	ps := onShards(t, "x", shards, 6)
	var want []string
	for round := range 6 {
		for sh := range shards {
			p := ps[(sh*5+round)%shards][round]
			st := []*lb.Store{s1, s2}[(round+sh)%2]
			if (round+sh)%3 == 0 { // some through SubmitMany
				outs, err := st.SubmitMany(ctx, []lb.Submission{{Board: b.ID, Player: p, Score: 10}})
				if err != nil || outs[0].Err != nil {
					t.Fatal(err, outs[0].Err)
				}
			} else {
				mustSubmit(t, st, lb.Submission{Board: b.ID, Player: p, Score: 10})
			}
			want = append(want, p)
		}
	}
	for _, st := range []*lb.Store{s1, s2} {
		p, err := st.Top(ctx, lb.View{Board: b.ID}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(p.Entries))
		for i, e := range p.Entries {
			got[i] = e.PlayerID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("equal scores from two stores, one call after another:\n got %v\nwant %v", got, want)
		}
	}
}

// TestShardedSubmitManyResults: the result of every item of a SubmitMany call on a quiet sharded board is the one
// an unsharded board gives: its rank, tie rank, previous rank and size right after the items before it (in input
// order, across shards) were applied. S=1 runs the same calls as a control of the model.
func TestShardedSubmitManyResults(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, shards := range []int{1, 7} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, clock := shardStore(t, rdb)
			def := lb.Board{ID: "many", Mode: lb.Best, Shards: shards}
			mustBoard(t, s, def)
			m := newShardModel(def)
			rng := rand.New(rand.NewPCG(4, 6))
			for call := range 8 {
				clock.Set(clock.Now().Add(time.Second))
				batch := make([]lb.Submission, 150)
				for i := range batch {
					batch[i] = lb.Submission{Board: def.ID, Player: fmt.Sprintf("m%d", rng.IntN(120)),
						Score: float64(rng.IntN(8))}
				}
				outs, err := s.SubmitMany(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				for i, sub := range batch {
					k := mKey{lb.AllTime, "all"}
					var prev *int64
					if _, ok := m.periods[k][sub.Player]; ok {
						r, _, _ := m.rankOf(k, sub.Player)
						prev = &r
					}
					m.submit(sub, clock.Now())
					rank, tie, size := m.rankOf(k, sub.Player)
					o := outs[i]
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					r := o.Result
					if r.Entry.Rank != rank || r.Entry.TieRank != tie || r.Size != size ||
						(r.PreviousRank == nil) != (prev == nil) || (prev != nil && *r.PreviousRank != *prev) {
						pr := "nil"
						if r.PreviousRank != nil {
							pr = fmt.Sprint(*r.PreviousRank)
						}
						wp := "nil"
						if prev != nil {
							wp = fmt.Sprint(*prev)
						}
						t.Fatalf("call %d item %d (%s -> %v, shard %d): rank %d tieRank %d size %d previousRank %s; "+
							"want %d %d %d %s (as after the items before it)", call, i, sub.Player, sub.Score,
							lb.ShardOf(sub.Player, max(shards, 1)), r.Entry.Rank, r.Entry.TieRank, r.Size, pr,
							rank, tie, size, wp)
					}
				}
			}
		})
	}
}

// TestShardedEventIDs: eventIds on a sharded board behave as on an unsharded one (S=1 runs the same as a
// control), except as the README allows: a retry is Duplicate and gets the first result back (score and rank as
// first reported, as on one shard); the same eventId for another score of the player, or for another player of the
// same shard, is a CONFLICT and changes nothing (for a player of another shard the README lets it apply); two items
// of one call with one eventId apply once; 500 events sent 4 times each concurrently over players of every shard
// are applied once each.
func TestShardedEventIDs(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, shards := range []int{1, 7} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, _ := shardStore(t, rdb)
			b := mustBoard(t, s, lb.Board{ID: "events", Mode: lb.Sum, Shards: shards})
			v := lb.View{Board: b.ID}
			ps := onShards(t, "e", 7, 2) // seven shards' worth of players, whatever this board's S
			p, q := ps[0][0], ps[3][0]
			mate := ps[0][1] // p's shard on 7 shards (and on 1)
			first := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: 5, EventID: "ev-1"})
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: ps[1][0], Score: 9})
			again := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: 5, EventID: "ev-1"})
			if !again.Duplicate || first.Duplicate || again.Entry.Score != first.Entry.Score {
				t.Fatalf("retry of ev-1: %+v; first %+v", again, first)
			}
			if again.Entry.Rank != first.Entry.Rank || again.Entry.TieRank != first.Entry.TieRank || again.Size != first.Size {
				t.Errorf("retry of ev-1: rank %d tieRank %d size %d; the first result said %d %d %d (a board of one "+
					"shard gives the first result back)", again.Entry.Rank, again.Entry.TieRank, again.Size,
					first.Entry.Rank, first.Entry.TieRank, first.Size)
			}
			for _, sub := range []lb.Submission{
				{Board: b.ID, Player: mate, Score: 5, EventID: "ev-1"}, // another player, the same shard
				{Board: b.ID, Player: p, Score: 6, EventID: "ev-1"},    // another score
			} {
				if _, err := s.Submit(ctx, sub); lb.ErrorCode(err) != lb.Conflict {
					t.Fatalf("ev-1 reused for %s %v: %v, want CONFLICT", sub.Player, sub.Score, err)
				}
			}
			if e, err := s.Rank(ctx, v, mate); err != nil || e != nil {
				t.Fatalf("the refused reuse of ev-1 wrote %s: %+v, %v", mate, e, err)
			}
			if e, err := s.Rank(ctx, v, p); err != nil || e == nil || e.Score != 5 {
				t.Fatalf("%s after the refused reuse: %+v, %v; want score 5", p, e, err)
			}
			if shards == 1 { // one shard sees every eventId
				if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: q, Score: 5, EventID: "ev-1"}); lb.ErrorCode(err) != lb.Conflict {
					t.Fatalf("ev-1 reused for %s on one shard: %v, want CONFLICT", q, err)
				}
			}
			outs, err := s.SubmitMany(ctx, []lb.Submission{{Board: b.ID, Player: q, Score: 2, EventID: "ev-2"},
				{Board: b.ID, Player: ps[5][0], Score: 1}, {Board: b.ID, Player: q, Score: 2, EventID: "ev-2"}})
			if err != nil {
				t.Fatal(err)
			}
			if outs[0].Err != nil || outs[2].Err != nil || outs[0].Result.Duplicate || !outs[2].Result.Duplicate {
				t.Fatalf("ev-2 twice in one call: %+v %v, %+v %v", outs[0].Result, outs[0].Err, outs[2].Result, outs[2].Err)
			}
			if e, err := s.Rank(ctx, v, q); err != nil || e == nil || (e.Score != 2 && (shards == 1 || e.Score != 7)) {
				t.Fatalf("%s after ev-2 twice: %+v, %v; want 2 (or 7 with ev-1's reuse on another shard)", q, e, err)
			}

			const events, tries = 500, 4
			var wg sync.WaitGroup
			var mu sync.Mutex
			applied := map[string]int{}
			sem := make(chan struct{}, 32)
			for i := range events {
				for range tries {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer func() { <-sem; wg.Done() }()
						player := ps[i%7][1]
						r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: player, Score: 1,
							EventID: fmt.Sprintf("c-%d", i)})
						if err != nil {
							t.Errorf("event c-%d: %v", i, err)
							return
						}
						if !r.Duplicate {
							mu.Lock()
							applied[fmt.Sprintf("c-%d", i)]++
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if len(applied) != events {
				t.Fatalf("%d events applied, want %d", len(applied), events)
			}
			for id, n := range applied {
				if n != 1 {
					t.Fatalf("event %s applied %d times", id, n)
				}
			}
			for sh := range 7 {
				want := float64(events / 7)
				if sh < events%7 {
					want++
				}
				if e, err := s.Rank(ctx, v, ps[sh][1]); err != nil || e == nil || e.Score != want {
					t.Fatalf("%s after its retried events: %+v, %v; want %v", ps[sh][1], e, err, want)
				}
			}
		})
	}
}

// writersScale is how many calls each writer of TestShardedConcurrentWriters makes.
func writersScale() int {
	if testing.Short() || redistest.Race {
		return 25
	}
	return 60
}

// TestShardedConcurrentWriters: 16 goroutines over two stores (two clients) write BEST and SUM boards of 3 and 16
// shards at once, through Submit and SubmitMany, on overlapping players. Afterwards, quiet, nobody is counted twice
// or missed: Size and the whole Top are the set of players submitted, every BEST score is the best submitted (order
// independent) and every SUM the total; ranks are 1..n in score order, tie ranks count the better scores, and
// Ranks, Around and Friends agree with Top.
func TestShardedConcurrentWriters(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, shards := range []int{3, 16} {
		for _, mode := range []lb.Mode{lb.Best, lb.Sum} {
			t.Run(fmt.Sprintf("S=%d/%s", shards, mode), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s1, clock := shardStore(t, rdb)
				s2 := lb.New(rdb, lb.Config{Prefix: s1.Prefix(), Clock: clock.Now})
				b := mustBoard(t, s1, lb.Board{ID: "writers", Mode: mode, Shards: shards})
				const writers, pool = 16, 1500
				calls := writersScale()
				var mu sync.Mutex
				want := map[string]float64{}
				var wg sync.WaitGroup
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						st := []*lb.Store{s1, s2}[w%2]
						rng := rand.New(rand.NewPCG(uint64(w), uint64(shards)))
						mine := map[string]float64{}
						apply := func(sub lb.Submission) {
							if old, ok := mine[sub.Player]; ok {
								if mode == lb.Sum {
									sub.Score += old
								} else {
									sub.Score = max(sub.Score, old)
								}
							}
							mine[sub.Player] = sub.Score
						}
						for range calls {
							n := 1
							if rng.IntN(3) > 0 {
								n = 1 + rng.IntN(40)
							}
							batch := make([]lb.Submission, n)
							for i := range batch {
								batch[i] = lb.Submission{Board: b.ID, Player: fmt.Sprintf("w%d", rng.IntN(pool)),
									Score: float64(rng.IntN(30))}
							}
							outs, err := st.SubmitMany(ctx, batch)
							if err != nil {
								t.Errorf("SubmitMany: %v", err)
								return
							}
							for i, o := range outs {
								if o.Err != nil {
									t.Errorf("item %+v: %v", batch[i], o.Err)
									return
								}
								apply(batch[i])
							}
						}
						mu.Lock()
						defer mu.Unlock()
						for p, sc := range mine {
							if old, ok := want[p]; ok {
								if mode == lb.Sum {
									sc += old
								} else {
									sc = max(sc, old)
								}
							}
							want[p] = sc
						}
					}()
				}
				wg.Wait()
				if t.Failed() {
					return
				}
				checkSettled(t, s1, lb.View{Board: b.ID}, want)
			})
		}
	}
}

// TestShardedReadsDuringWrites: while eight writers raise BEST scores on a 7-shard board, readers check what the
// README promises of reads under writes: a write acknowledged before a read began is in it (Ranks shows the player
// with at least that score; Size counts at least the players acknowledged), and nobody is listed twice or missed by
// Top (distinct players, ranks 1.. in order, scores never better further down) or Around (consecutive ranks
// around the player).
func TestShardedReadsDuringWrites(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, clock := shardStore(t, rdb)
	reader := lb.New(rdb, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
	b := mustBoard(t, s, lb.Board{ID: "busy", Shards: 7})
	v := lb.View{Board: b.ID}
	const pool = 600
	var mu sync.Mutex
	acked := map[string]float64{} // player -> the best score acknowledged so far
	snapshot := func() map[string]float64 {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(acked)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 77))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				batch := make([]lb.Submission, 1+rng.IntN(8))
				for j := range batch {
					batch[j] = lb.Submission{Board: b.ID, Player: fmt.Sprintf("b%d", rng.IntN(pool)),
						Score: float64(i/4 + rng.IntN(20))}
				}
				outs, err := s.SubmitMany(ctx, batch)
				if err != nil {
					t.Errorf("SubmitMany: %v", err)
					return
				}
				mu.Lock()
				for j, o := range outs {
					if o.Err != nil {
						mu.Unlock()
						t.Errorf("item %+v: %v", batch[j], o.Err)
						return
					}
					acked[batch[j].Player] = max(acked[batch[j].Player], batch[j].Score)
				}
				mu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	if testing.Short() || redistest.Race {
		deadline = time.Now().Add(2 * time.Second)
	}
	reads := 0
	for ; time.Now().Before(deadline) && !t.Failed(); reads++ {
		before := snapshot()
		if len(before) == 0 { // no write acknowledged yet
			time.Sleep(5 * time.Millisecond)
			reads--
			continue
		}
		ids := slices.Collect(maps.Keys(before))
		if len(ids) > lb.MaxFriends {
			ids = ids[:lb.MaxFriends]
		}
		p, err := reader.Ranks(ctx, v, ids)
		if err != nil {
			t.Fatalf("Ranks: %v", err)
		}
		got := map[string]float64{}
		for _, e := range p.Entries {
			got[e.PlayerID] = e.Score
		}
		for _, id := range ids {
			if sc, ok := got[id]; !ok || sc < before[id] {
				t.Fatalf("read %d: %s acknowledged with %v before Ranks began; Ranks shows %v (listed %v)", reads, id,
					before[id], sc, ok)
			}
		}
		if p.Size < int64(len(before)) {
			t.Fatalf("read %d: Ranks size %d, but %d players were acknowledged before it", reads, p.Size, len(before))
		}
		top, err := reader.Top(ctx, v, 0, lb.MaxFirst)
		if err != nil {
			t.Fatalf("Top: %v", err)
		}
		seen := map[string]bool{}
		for i, e := range top.Entries {
			if seen[e.PlayerID] || e.Rank != int64(i+1) || (i > 0 && e.Score > top.Entries[i-1].Score) {
				t.Fatalf("read %d: Top entry %d: %s rank %d score %v (listed before: %v; the one above: %+v)", reads, i,
					e.PlayerID, e.Rank, e.Score, seen[e.PlayerID], top.Entries[max(i-1, 0)])
			}
			seen[e.PlayerID] = true
		}
		if len(top.Entries) < min(len(before), lb.MaxFirst) {
			t.Fatalf("read %d: Top lists %d players, %d were acknowledged before it", reads, len(top.Entries), len(before))
		}
		me := ids[reads%len(ids)]
		around, err := reader.Around(ctx, v, me, 3)
		if err != nil {
			t.Fatalf("Around: %v", err)
		}
		found := false
		for i, e := range around {
			found = found || e.PlayerID == me
			if i > 0 && (e.Rank != around[i-1].Rank+1 || e.PlayerID == around[i-1].PlayerID) {
				t.Fatalf("read %d: Around(%s) = %v", reads, me, entryIDs(around))
			}
		}
		if !found {
			t.Fatalf("read %d: Around(%s) = %v, without the player", reads, me, entryIDs(around))
		}
	}
	close(stop)
	wg.Wait()
	if reads < 5 {
		t.Fatalf("only %d reads ran beside the writes", reads)
	}
	t.Logf("%d reads beside the writes, %d players", reads, len(snapshot()))
}

// checkSettled holds a quiet DESC board to the players and scores it must have (order of arrival unknown).
func checkSettled(t *testing.T, s *lb.Store, v lb.View, want map[string]float64) {
	t.Helper()
	ctx := context.Background()
	n := len(want)
	if got, err := s.Size(ctx, v); err != nil || got != int64(n) {
		t.Fatalf("Size = %d, %v; want %d players", got, err, n)
	}
	var all []lb.Entry
	for off := 0; off < n; off += lb.MaxFirst {
		p, err := s.Top(ctx, v, off, lb.MaxFirst)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size != int64(n) {
			t.Fatalf("Top(%d): size %d, want %d", off, p.Size, n)
		}
		all = append(all, p.Entries...)
	}
	if len(all) != n {
		t.Fatalf("Top lists %d entries, want %d", len(all), n)
	}
	seen := map[string]bool{}
	var tie int64
	for i, e := range all {
		if seen[e.PlayerID] {
			t.Fatalf("%s listed twice (rank %d)", e.PlayerID, e.Rank)
		}
		seen[e.PlayerID] = true
		sc, ok := want[e.PlayerID]
		if !ok {
			t.Fatalf("%s listed (rank %d) but never submitted", e.PlayerID, e.Rank)
		}
		if e.Score != sc {
			t.Fatalf("%s has %v, want %v", e.PlayerID, e.Score, sc)
		}
		if e.Rank != int64(i+1) {
			t.Fatalf("entry %d has rank %d", i, e.Rank)
		}
		if i > 0 && e.Score > all[i-1].Score {
			t.Fatalf("rank %d (%v) above rank %d (%v)", i+1, e.Score, i, all[i-1].Score)
		}
		if i == 0 || e.Score != all[i-1].Score {
			tie = int64(i + 1)
		}
		if e.TieRank != tie {
			t.Fatalf("%s at rank %d: tieRank %d, want %d", e.PlayerID, e.Rank, e.TieRank, tie)
		}
	}
	ids := make([]string, 0, n)
	for _, e := range all {
		ids = append(ids, e.PlayerID)
	}
	for i := 0; i < n; i += lb.MaxFriends {
		p, err := s.Ranks(ctx, v, ids[i:min(i+lb.MaxFriends, n)])
		if err != nil {
			t.Fatal(err)
		}
		if d := entriesDiff(p.Entries, all[i:min(i+lb.MaxFriends, n)]); d != "" {
			t.Fatalf("Ranks disagree with Top: %s", d)
		}
	}
	for _, j := range []int{0, n / 3, n - 1} {
		got, err := s.Around(ctx, v, all[j].PlayerID, 2)
		if err != nil {
			t.Fatal(err)
		}
		lo := max(0, j-2)
		hi := min(n-1, lo+4)
		lo = max(0, hi-4)
		if d := entriesDiff(got, all[lo:hi+1]); d != "" {
			t.Fatalf("Around(rank %d) disagrees with Top: %s", j+1, d)
		}
	}
	// Concurrent Rank and Around calls (which the store may group into shared reads) agree with Top too.
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := (g * 7919) % n
			f := lb.AllFields
			var opts []lb.ReadOption
			if g%2 == 1 {
				f = lb.FieldUpdatedAt
				opts = []lb.ReadOption{lb.Only(f)}
			}
			want := all[j]
			if f&lb.FieldTieRank == 0 {
				want.TieRank = 0
			}
			if f&lb.FieldMeta == 0 {
				want.DisplayName, want.Metadata = nil, nil
			}
			e, err := s.Rank(ctx, v, all[j].PlayerID, opts...)
			if err != nil || e == nil {
				errs <- fmt.Sprintf("concurrent Rank(%s) = %+v, %v", all[j].PlayerID, e, err)
				return
			}
			if d := entryDiff(*e, want); d != "" {
				errs <- fmt.Sprintf("concurrent Rank(%s) fields %b: %s", all[j].PlayerID, f, d)
				return
			}
			got, err := s.Around(ctx, v, all[j].PlayerID, 1, opts...)
			lo := max(0, min(j-1, n-3))
			var exp []lb.Entry
			for i := lo; i < min(lo+3, n); i++ {
				w := all[i]
				if f&lb.FieldTieRank == 0 {
					w.TieRank = 0
				}
				if f&lb.FieldMeta == 0 {
					w.DisplayName, w.Metadata = nil, nil
				}
				exp = append(exp, w)
			}
			if err != nil {
				errs <- fmt.Sprintf("concurrent Around(%s): %v", all[j].PlayerID, err)
			} else if d := entriesDiff(got, exp); d != "" {
				errs <- fmt.Sprintf("concurrent Around(%s) fields %b: %s", all[j].PlayerID, f, d)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	fr, err := s.Friends(ctx, v, all[n-1].PlayerID, []string{all[0].PlayerID, all[n/2].PlayerID, "none"})
	if err != nil {
		t.Fatal(err)
	}
	if d := entriesDiff(fr, []lb.Entry{all[0], all[n/2], all[n-1]}); d != "" {
		t.Fatalf("Friends disagree with Top: %s", d)
	}
}

// TestShardedDeleteAndRecreate: a sharded board with names, eventIds and two windows, deleted, has no key left
// under the key base of any of its shards (nor under the board's pattern) when DeleteBoard returns; reads and writes
// are NOT_FOUND; created again with another number of shards (3, 16, unsharded) it starts empty: no old player,
// name or eventId, and only its own shards get keys.
func TestShardedDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, _ := shardStore(t, rdb)
	const id = "deleted {later}"
	keysOf := func(shards int) map[string][]string {
		out := map[string][]string{}
		for i := range max(shards, 1) {
			base := lb.ShardKeyBase(s.Prefix(), id, i, max(shards, 1))
			out[base] = shardKeys(t, rdb, base)
		}
		return out
	}
	allBases := func() map[string]bool {
		m := map[string]bool{}
		for _, sh := range []int{1, 3, 7, 16} {
			for base := range keysOf(sh) {
				m[base] = true
			}
		}
		return m
	}()
	leftover := func() []string {
		var left []string
		for base := range allBases {
			left = append(left, shardKeys(t, rdb, base)...)
		}
		return append(left, shardKeys(t, rdb, lb.KeyBase(s.Prefix(), id))...)
	}
	var prev int
	for round, shards := range []int{7, 3, 16, 1} {
		def := lb.Board{ID: id, Windows: []lb.Window{lb.AllTime, lb.Daily}, Shards: shards}
		mustBoard(t, s, def)
		// Nothing of the board before shows.
		for _, w := range def.Windows {
			v := lb.View{Board: id, Window: w}
			if n, err := s.Size(ctx, v); err != nil || n != 0 {
				t.Fatalf("round %d (S=%d, before: S=%d): %s size %d, %v; want 0", round, shards, prev, w, n, err)
			}
			if p, err := s.Top(ctx, v, 0, 10); err != nil || len(p.Entries) != 0 || p.Size != 0 {
				t.Fatalf("round %d (S=%d): %s top %+v, %v; want empty", round, shards, w, p, err)
			}
			if e, err := s.Rank(ctx, v, "d1"); err != nil || e != nil {
				t.Fatalf("round %d (S=%d): an old player shows: %+v, %v", round, shards, e, err)
			}
		}
		var subs []lb.Submission
		for i := range 600 {
			subs = append(subs, lb.Submission{Board: id, Player: fmt.Sprintf("d%d", i), Score: float64(i % 13),
				EventID: fmt.Sprintf("ev%d", i), DisplayName: ptr(fmt.Sprintf("n%d-%d", round, i))})
		}
		outs, err := s.SubmitMany(ctx, subs)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			if o.Err != nil || o.Result.Duplicate || o.Result.PreviousScore != nil {
				t.Fatalf("round %d (S=%d): item %d of the new board: %+v, %v; want a new player, no duplicate",
					round, shards, i, o.Result, o.Err)
			}
		}
		if e, err := s.Rank(ctx, lb.View{Board: id}, "d1"); err != nil || e == nil || e.DisplayName == nil ||
			*e.DisplayName != fmt.Sprintf("n%d-1", round) {
			t.Fatalf("round %d: d1 = %+v, %v", round, e, err)
		}
		own := keysOf(shards)
		for base, keys := range own {
			if len(keys) == 0 {
				t.Fatalf("round %d (S=%d): no key under shard base %q", round, shards, base)
			}
		}
		for base := range allBases {
			if _, mine := own[base]; !mine {
				if k := shardKeys(t, rdb, base); len(k) > 0 {
					t.Fatalf("round %d (S=%d): keys under %q, no shard of this board: %v", round, shards, base, k[:min(5, len(k))])
				}
			}
		}
		list, err := s.Boards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		listed := 0
		for _, lbd := range list {
			if lbd.ID == id {
				listed++
				if !sameShards(lbd.Shards, shards) {
					t.Fatalf("Boards lists it with Shards %d, want %d", lbd.Shards, shards)
				}
			}
		}
		if listed != 1 {
			t.Fatalf("round %d (S=%d): Boards lists the board %d times", round, shards, listed)
		}

		ok, err := s.DeleteBoard(ctx, id)
		if err != nil || !ok {
			t.Fatalf("round %d (S=%d): DeleteBoard = %v, %v", round, shards, ok, err)
		}
		if left := leftover(); len(left) > 0 {
			// Tell a purge that is late from one that never comes.
			deadline := time.Now().Add(15 * time.Second)
			for len(leftover()) > 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			t.Fatalf("round %d (S=%d): %d keys left when DeleteBoard returned (%d after 15 s more), e.g. %v",
				round, shards, len(left), len(leftover()), left[:min(5, len(left))])
		}
		if _, err := s.Top(ctx, lb.View{Board: id}, 0, 5); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Top after delete: %v, want NOT_FOUND", err)
		}
		if _, err := s.Rank(ctx, lb.View{Board: id}, "d1"); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Rank after delete: %v, want NOT_FOUND", err)
		}
		if _, err := s.Submit(ctx, lb.Submission{Board: id, Player: "d1", Score: 1}); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Submit after delete: %v, want NOT_FOUND", err)
		}
		if left := leftover(); len(left) > 0 {
			t.Fatalf("round %d: the refused calls after the delete made keys: %v", round, left)
		}
		if ok, err := s.DeleteBoard(ctx, id); ok || err != nil {
			t.Fatalf("second DeleteBoard = %v, %v; want false, nil", ok, err)
		}
		prev = shards
	}
}

// TestShardedDeleteRacesSubmits: submissions (with eventIds) and reads run on a sharded board while it is deleted;
// each either succeeds or is NOT_FOUND, and when DeleteBoard returns no key is left under any shard's key base, nor
// made by the writes that keep coming after it.
func TestShardedDeleteRacesSubmits(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, clock := shardStore(t, rdb)
	const shards = 7
	def := lb.Board{ID: "racy", Windows: []lb.Window{lb.AllTime, lb.Daily}, Shards: shards}
	mustBoard(t, s, def)
	for i := range 100 {
		mustSubmit(t, s, lb.Submission{Board: def.ID, Player: fmt.Sprintf("seed%d", i), Score: float64(i)})
	}
	leftover := func() []string {
		var keys []string
		for i := range shards {
			keys = append(keys, shardKeys(t, rdb, lb.ShardKeyBase(s.Prefix(), def.ID, i, shards))...)
		}
		return keys
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var ok [4]int
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := lb.New(rdb, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var errs3 []error
				if i%2 == 0 {
					_, err := other.Submit(ctx, lb.Submission{Board: def.ID, Player: fmt.Sprintf("w%d-%d", w, i%40),
						Score: float64(i), EventID: fmt.Sprintf("e%d-%d", w, i)})
					errs3 = append(errs3, err)
				} else {
					outs, err := other.SubmitMany(ctx, []lb.Submission{
						{Board: def.ID, Player: fmt.Sprintf("m%d-%d", w, i%40), Score: 1},
						{Board: def.ID, Player: fmt.Sprintf("n%d-%d", w, i%40), Score: 2}})
					errs3 = append(errs3, err)
					if err == nil {
						errs3 = append(errs3, outs[0].Err, outs[1].Err)
					}
				}
				_, err := other.Top(ctx, lb.View{Board: def.ID}, 0, 5)
				errs3 = append(errs3, err)
				if errors.Join(errs3...) == nil {
					ok[w]++
				}
				for _, err := range errs3 {
					if err != nil && lb.ErrorCode(err) != lb.NotFound {
						errs <- err
						return
					}
				}
			}
		}()
	}
	time.Sleep(150 * time.Millisecond) // the writers get going
	deleted, err := s.DeleteBoard(ctx, def.ID)
	if err != nil || !deleted {
		close(stop)
		wg.Wait()
		t.Fatalf("DeleteBoard = %v, %v", deleted, err)
	}
	left := leftover()
	time.Sleep(300 * time.Millisecond) // the writers keep trying on the deleted board
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a concurrent call failed with something else than NOT_FOUND: %v", err)
	default:
	}
	if ok[0]+ok[1]+ok[2]+ok[3] == 0 {
		t.Fatal("no write succeeded before the deletion: the race was not run")
	}
	if len(left) > 0 {
		t.Fatalf("%d keys left when DeleteBoard returned, e.g. %v", len(left), left[:min(5, len(left))])
	}
	if left := leftover(); len(left) > 0 {
		t.Fatalf("%d keys made by writes after the deletion, e.g. %v", len(left), left[:min(5, len(left))])
	}
}

// TestShardedSnapshot: Snapshot (what the export streams) of a sharded board covers every shard, or refuses the
// board with BAD_USER_INPUT; it never answers for shard 0 alone.
func TestShardedSnapshot(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, _ := shardStore(t, rdb)
	b := mustBoard(t, s, lb.Board{ID: "exported", Shards: 7})
	for i := range 100 {
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 10)})
	}
	sn, err := s.Snapshot(ctx, lb.View{Board: b.ID})
	if lb.ErrorCode(err) == lb.Invalid {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close(ctx)
	if sn.Size != 100 || sn.Rows != 100 {
		t.Fatalf("Snapshot of a 7-shard board of 100 players: size %d, rows %d", sn.Size, sn.Rows)
	}
}

// TestShardedExactTop: on a board with exactTop (S=1 as the control, 5 shards), with 2,000 players on integer
// scores 0..99 (heavy ties): Top lists the board's exact tier, ranks 1..exactTop, exactly as the model ranks them
// (every field) with the whole board's size; a tier player's Rank is exact; a player beyond it is Approximate with
// its exact score and an estimated rank within the true ranks of the players with its score (the README's bound
// for integer scores below 16384, which holds shard by shard and so for their sum).
func TestShardedExactTop(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, shards := range []int{1, 5} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, clock := shardStore(t, rdb)
			def := lb.Board{ID: "exact", Shards: shards, ExactTop: 50}
			mustBoard(t, s, def)
			m := newShardModel(def)
			rng := rand.New(rand.NewPCG(50, uint64(shards)))
			for range 6 {
				batch := make([]lb.Submission, 1000)
				for i := range batch {
					batch[i] = lb.Submission{Board: def.ID, Player: fmt.Sprintf("x%d", rng.IntN(2000)),
						Score: float64(rng.IntN(100))}
				}
				outs, err := s.SubmitMany(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range outs {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					m.submit(batch[i], clock.Now())
				}
			}
			k := mKey{lb.AllTime, "all"}
			rows, _ := m.ranking(k)
			n := len(rows)
			v := lb.View{Board: def.ID}
			p, err := s.Top(ctx, v, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var exp []lb.Entry
			for i := range def.ExactTop {
				exp = append(exp, m.entry(rows[i], n, lb.AllFields))
			}
			if d := entriesDiff(p.Entries, exp); d != "" || p.Size != int64(n) {
				t.Fatalf("Top(0, 100) with exactTop %d: size %d (want %d): %s", def.ExactTop, p.Size, n, d)
			}
			for _, i := range []int{0, 1, def.ExactTop - 2, def.ExactTop - 1} {
				e, err := s.Rank(ctx, v, rows[i].id)
				if err != nil || e == nil {
					t.Fatalf("Rank(%s): %+v, %v", rows[i].id, e, err)
				}
				if d := entryDiff(*e, exp[i]); d != "" {
					t.Fatalf("Rank(%s) in the exact tier: %s", rows[i].id, d)
				}
			}
			for i := def.ExactTop; i < n; i += 37 {
				r := rows[i]
				lo := r.tieRank // the true ranks of the players with r's score
				hi := lo
				for hi < int64(n) && rows[hi].e.score == r.e.score {
					hi++
				}
				e, err := s.Rank(ctx, v, r.id)
				if err != nil || e == nil {
					t.Fatalf("Rank(%s): %+v, %v", r.id, e, err)
				}
				if !e.Approximate || e.Score != r.e.score || e.Rank < lo || e.Rank > hi || e.Rank <= int64(def.ExactTop) {
					t.Fatalf("Rank(%s) beyond the exact tier (true rank %d, players with score %v at ranks %d..%d): "+
						"approximate %v score %v rank %d", r.id, r.rank, r.e.score, lo, hi, e.Approximate, e.Score, e.Rank)
				}
			}
		})
	}
}

// TestShardedCreateRules: the number of shards is checked (2..MaxShards; 0 and 1 unsharded, the same definition)
// and kept in the definition (the same one again returns the board, another S is a CONFLICT); exactTop and a SEASON
// window are allowed on sharded boards (main's README; the first contract refused them).
func TestShardedCreateRules(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, _ := shardStore(t, rdb)
	if lb.MaxShards != 64 || lb.MaxShardedDepth != 10_000 {
		t.Fatalf("MaxShards %d, MaxShardedDepth %d; the contract says 64 and 10000", lb.MaxShards, lb.MaxShardedDepth)
	}
	for i, c := range []lb.Board{{Shards: -1}, {Shards: lb.MaxShards + 1}, {Shards: 1000},
		{Shards: lb.MaxShards + 1, ExactTop: 5}} {
		c.ID = fmt.Sprintf("refused-%d", i)
		if _, err := s.CreateBoard(ctx, c); lb.ErrorCode(err) != lb.Invalid {
			t.Fatalf("CreateBoard(Shards %d) = %v, want BAD_USER_INPUT", c.Shards, err)
		}
		if _, err := s.Board(ctx, c.ID); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("the refused board %s exists: %v", c.ID, err)
		}
	}
	for _, c := range []lb.Board{{ID: "exact", Shards: 3, ExactTop: 100}, {ID: "season", Shards: 5,
		Windows: []lb.Window{lb.AllTime, lb.Season}}, {ID: "plain-0", Shards: 0, ExactTop: 10}} {
		b := mustBoard(t, s, c)
		if !sameShards(b.Shards, c.Shards) || b.ExactTop != c.ExactTop {
			t.Fatalf("created %s: Shards %d ExactTop %d", c.ID, b.Shards, b.ExactTop)
		}
	}
	for _, sh := range []int{2, lb.MaxShards} {
		b := mustBoard(t, s, lb.Board{ID: fmt.Sprintf("ok-%d", sh), Shards: sh, Windows: []lb.Window{lb.Daily, lb.Monthly}})
		if b.Shards != sh {
			t.Fatalf("created with Shards %d: %d", sh, b.Shards)
		}
		// The same definition again is the board; another S (or unsharded) is a conflict.
		if again := mustBoard(t, s, lb.Board{ID: b.ID, Shards: sh, Windows: []lb.Window{lb.Daily, lb.Monthly}}); again.Shards != sh {
			t.Fatalf("created again: Shards %d", again.Shards)
		}
		for _, other := range []int{0, 1, 3} {
			if _, err := s.CreateBoard(ctx, lb.Board{ID: b.ID, Shards: other, Windows: []lb.Window{lb.Daily, lb.Monthly}}); lb.ErrorCode(err) != lb.Conflict {
				t.Fatalf("board of %d shards created again with %d: %v, want CONFLICT", sh, other, err)
			}
		}
		got, err := lb.New(rdb, lb.Config{Prefix: s.Prefix()}).Board(ctx, b.ID)
		if err != nil || got.Shards != sh {
			t.Fatalf("Board read by another store: %+v, %v; want Shards %d", got, err, sh)
		}
	}
	// 0 and 1 are the same definition.
	if _, err := s.CreateBoard(ctx, lb.Board{ID: "plain-0", Shards: 1, ExactTop: 10}); err != nil {
		t.Fatalf("an unsharded board (Shards 0) created again with Shards 1: %v, want the board", err)
	}
}

// TestShardedTopDepth: Top on a sharded board lists ranks down to MaxShardedDepth and refuses deeper pages with
// BAD_USER_INPUT, while Rank, Ranks and Around still reach the players below it (10,050 players); an unsharded
// board lists them all.
func TestShardedTopDepth(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	for _, shards := range []int{1, 7} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			s, clock := shardStore(t, rdb)
			def := lb.Board{ID: "deep", Shards: shards}
			mustBoard(t, s, def)
			m := newShardModel(def)
			const players = lb.MaxShardedDepth + 50
			var batch []lb.Submission
			for i := range players {
				sub := lb.Submission{Board: def.ID, Player: fmt.Sprintf("d%05d", (i*7919)%players), Score: float64(i % 500)}
				batch = append(batch, sub)
				m.submit(sub, clock.Now())
				if len(batch) == lb.MaxBulk || i == players-1 {
					outs, err := s.SubmitMany(ctx, batch)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range outs {
						if o.Err != nil {
							t.Fatal(o.Err)
						}
					}
					batch = batch[:0]
				}
			}
			k := mKey{lb.AllTime, "all"}
			rows, _ := m.ranking(k)
			v := lb.View{Board: def.ID}
			page := func(off, first int) error {
				p, err := s.Top(ctx, v, off, first)
				if err != nil {
					return err
				}
				var exp []lb.Entry
				for i := off; i < min(off+first, players); i++ {
					exp = append(exp, m.entry(rows[i], players, lb.AllFields))
				}
				if d := entriesDiff(p.Entries, exp); d != "" {
					t.Fatalf("Top(%d, %d): %s", off, first, d)
				}
				return nil
			}
			for _, pg := range [][2]int{{lb.MaxShardedDepth - lb.MaxFirst, lb.MaxFirst}, {lb.MaxShardedDepth - 1, 1},
				{lb.MaxShardedDepth, 0}, {4321, 999}} {
				if err := page(pg[0], pg[1]); err != nil {
					t.Fatalf("Top(%d, %d): %v", pg[0], pg[1], err)
				}
			}
			for _, pg := range [][2]int{{lb.MaxShardedDepth, 1}, {lb.MaxShardedDepth - 5, 10}, {lb.MaxShardedDepth + 10, 40},
				{9500, lb.MaxFirst}} {
				err := page(pg[0], pg[1])
				if shards > 1 && lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("Top(%d, %d) on %d shards: %v, want BAD_USER_INPUT", pg[0], pg[1], shards, err)
				}
				if shards <= 1 && err != nil {
					t.Fatalf("Top(%d, %d) unsharded: %v", pg[0], pg[1], err)
				}
			}
			// Below the depth: Ranks, Rank and Around.
			var ids []string
			var exp []lb.Entry
			for i := lb.MaxShardedDepth - 10; i < players; i++ {
				ids = append(ids, rows[i].id)
				exp = append(exp, m.entry(rows[i], players, lb.AllFields))
			}
			p, err := s.Ranks(ctx, v, ids)
			if err != nil {
				t.Fatal(err)
			}
			if d := entriesDiff(p.Entries, exp); d != "" {
				t.Fatalf("Ranks below the depth: %s", d)
			}
			last := rows[players-1]
			if e, err := s.Rank(ctx, v, last.id); err != nil || e == nil || entryDiff(*e, exp[len(exp)-1]) != "" {
				t.Fatalf("Rank of the last player: %+v, %v; want %+v", e, err, exp[len(exp)-1])
			}
			got, err := s.Around(ctx, v, last.id, 5)
			if err != nil {
				t.Fatal(err)
			}
			if d := entriesDiff(got, exp[len(exp)-11:]); d != "" {
				t.Fatalf("Around the last player: %s", d)
			}
		})
	}
}
