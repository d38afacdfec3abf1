package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// nearCalls counts a store's shardnear.lua calls (a redistest.Commands hook).
type nearCalls struct{ n atomic.Int64 }

// nearStore is a store on the shared standalone Redis (shardStore) whose shardnear.lua calls are counted.
func nearStore(t *testing.T) (*lb.Store, *testClock, *nearCalls) {
	calls := &nearCalls{}
	s, clock := seenShardStore(t, calls.see)
	return s, clock, calls
}

func (c *nearCalls) see(cmd redis.Cmder) {
	a := cmd.Args()
	if strings.HasPrefix(strings.ToLower(fmt.Sprint(a[0])), "fcall") && len(a) > 1 &&
		strings.HasSuffix(fmt.Sprint(a[1]), "_shardnear") {
		c.n.Add(1)
	}
}

// TestShardedRanksPlain: rank reads of a sharded board without exactTop or tie ranks are answered without a script
// (shardranks.go), alone (Rank) and many at once (Ranks: players of every shard, one twice, one absent), with
// updatedAt and names or without, on boards of either order with heavy ties; every field equals the unsharded
// twin's (the oracle: the same submissions on a board of one shard). With a tie rank the script answers, equal
// too. Concurrent reads during writes answer every player, within the board, with a score the player had.
func TestShardedRanksPlain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock, calls := nearStore(t)
	for _, order := range []lb.Order{lb.Desc, lb.Asc} {
		sharded := mustBoard(t, s, lb.Board{ID: "plain-" + string(order), Shards: 3, Order: order, Mode: lb.Best})
		twin := mustBoard(t, s, lb.Board{ID: "plain-twin-" + string(order), Order: order, Mode: lb.Best})
		rng := rand.New(rand.NewPCG(46, 7))
		const players = 1500
		for i := 0; i < players; i += 500 {
			var subs []lb.Submission
			for j := i; j < i+500; j++ {
				sub := lb.Submission{Player: fmt.Sprint("p", j), Score: float64(rng.IntN(60))} // ~25 a score
				if j%3 == 0 {
					name := fmt.Sprint("name ", j)
					sub.DisplayName, sub.Metadata = &name, json.RawMessage(fmt.Sprintf(`{"j":%d}`, j))
				}
				subs = append(subs, sub)
			}
			submitBoth(t, s, sharded.ID, twin.ID, subs, lb.Only(0))
			clock.Set(clock.Now().Add(time.Second)) // updatedAt differs between the batches
		}
		for _, f := range []lb.Fields{0, lb.FieldUpdatedAt | lb.FieldMeta, lb.FieldTieRank | lb.FieldMeta} {
			where := fmt.Sprintf("%s fields %d", order, f)
			before := calls.n.Load()
			for i := 0; i < 60; i++ {
				pl := fmt.Sprint("p", rng.IntN(players+20)) // a few absent
				g, err := s.Rank(ctx, lb.View{Board: sharded.ID}, pl, lb.Only(f))
				if err != nil {
					t.Fatal(err)
				}
				w, err := s.Rank(ctx, lb.View{Board: twin.ID}, pl, lb.Only(f))
				if err != nil {
					t.Fatal(err)
				}
				if (g == nil) != (w == nil) {
					t.Fatalf("%s: Rank(%s) = %v, twin %v", where, pl, g, w)
				}
				if g != nil {
					if d := entryDiff(*g, *w); d != "" {
						t.Fatalf("%s: Rank(%s): %s", where, pl, d)
					}
				}
			}
			list := []string{"p1", "p2", "p3", "p4", "p5", "p6", "p2", "absent"}
			for i := 0; i < 40; i++ {
				list = append(list, fmt.Sprint("p", rng.IntN(players)))
			}
			g, err := s.Ranks(ctx, lb.View{Board: sharded.ID}, list, lb.Only(f))
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Ranks(ctx, lb.View{Board: twin.ID}, list, lb.Only(f))
			if err != nil {
				t.Fatal(err)
			}
			if g.Size != w.Size || g.Size != players {
				t.Fatalf("%s: Ranks size %d, twin %d, want %d", where, g.Size, w.Size, players)
			}
			var once []lb.Entry // a sharded board answers a player listed twice once
			seen := map[string]bool{}
			for _, e := range w.Entries {
				if !seen[e.PlayerID] {
					seen[e.PlayerID] = true
					once = append(once, e)
				}
			}
			if d := entriesDiff(g.Entries, once); d != "" {
				t.Fatalf("%s: Ranks: %s", where, d)
			}
			scripted := calls.n.Load() > before
			if want := f&lb.FieldTieRank != 0; scripted != want {
				t.Fatalf("%s: shardnear.lua called: %v, want %v", where, scripted, want)
			}
		}
	}

	// Reads during writes: every player answered, within the board, at a score it had (its scores only grow).
	const live = 300
	b := duringWrites(t, s, "plain-live", live, 150, func(board string, top *atomic.Int64, i, r int) error {
		pl := fmt.Sprint("q", (i*13+r)%live)
		e, err := s.Rank(ctx, lb.View{Board: board}, pl, lb.Only(0))
		if err != nil {
			return err
		}
		if e == nil || e.Rank < 1 || e.Rank > live || e.Score < 0 || e.Score >= float64(top.Load()) ||
			e.Score != float64(int64(e.Score)) {
			return fmt.Errorf("Rank(%s) during writes = %+v (scores written below %d)", pl, e, top.Load())
		}
		return nil
	})
	// Quiet again: every rank is the one the board's top list gives.
	page, err := s.Top(ctx, lb.View{Board: b.ID}, 0, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range page.Entries {
		want.TieRank = 0 // not asked
		g, err := s.Rank(ctx, lb.View{Board: b.ID}, want.PlayerID, lb.Only(lb.FieldUpdatedAt|lb.FieldMeta))
		if err != nil || g == nil {
			t.Fatalf("Rank(%s) = %v, %v", want.PlayerID, g, err)
		}
		if d := entryDiff(*g, want); d != "" {
			t.Fatalf("Rank(%s) after the writes: %s", want.PlayerID, d)
		}
	}
}

// TestShardedAroundPlain: aroundMe on a sharded board without exactTop or tie ranks is answered without a script
// (shardaround.go) for every player of a board with heavy ties (the ends included, where the window shifts) and
// an absent one, at radius 0, 1 and 4, with updatedAt and names or without; every entry equals the unsharded
// twin's. With a tie rank the script answers, equal too. Reads during writes answer windows of 2 × radius + 1
// players with consecutive ranks, in the board's order, no player twice, the player among them; quiet again, each
// is its slice of the top list.
func TestShardedAroundPlain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock, calls := nearStore(t)
	for _, order := range []lb.Order{lb.Desc, lb.Asc} {
		sharded := mustBoard(t, s, lb.Board{ID: "around-" + string(order), Shards: 3, Order: order, Mode: lb.Best})
		twin := mustBoard(t, s, lb.Board{ID: "around-twin-" + string(order), Order: order, Mode: lb.Best})
		rng := rand.New(rand.NewPCG(46, 9))
		const players = 240
		// The best 9 players all on shard 0 and the worst 9 on shard 1: the windows at the ends take 2 × radius
		// players from one shard.
		ids := onShards(t, "a", 3, players/3)
		var subs []lb.Submission
		for j := range players {
			sub := lb.Submission{Player: ids[j%3][j/3], Score: float64(rng.IntN(30))} // ~8 a score
			switch {
			case j%3 == 0 && j/3 < 9:
				sub.Score = float64(100 + j)
			case j%3 == 1 && j/3 < 9:
				sub.Score = float64(-100 - j)
			}
			if order == lb.Asc {
				sub.Score = -sub.Score
			}
			if j%4 == 0 {
				name := fmt.Sprint("name ", j)
				sub.DisplayName, sub.Metadata = &name, json.RawMessage(fmt.Sprintf(`{"j":%d}`, j))
			}
			subs = append(subs, sub)
			if j%80 == 79 {
				submitBoth(t, s, sharded.ID, twin.ID, subs, lb.Only(0))
				subs = nil
				clock.Set(clock.Now().Add(time.Second))
			}
		}
		for _, f := range []lb.Fields{0, lb.FieldUpdatedAt | lb.FieldMeta, lb.FieldTieRank} {
			for _, radius := range []int{0, 1, 4} {
				where := fmt.Sprintf("%s fields %d radius %d", order, f, radius)
				before := calls.n.Load()
				step := 1
				if radius != 4 || f != lb.FieldUpdatedAt|lb.FieldMeta {
					step = 7 // every player once, in the widest case; a sample otherwise (the ends included)
				}
				for j := 0; j <= players; j += step {
					pl := "absent"
					if j < players {
						pl = ids[j%3][j/3]
					}
					g, err := s.Around(ctx, lb.View{Board: sharded.ID}, pl, radius, lb.Only(f))
					if err != nil {
						t.Fatal(err)
					}
					w, err := s.Around(ctx, lb.View{Board: twin.ID}, pl, radius, lb.Only(f))
					if err != nil {
						t.Fatal(err)
					}
					if d := entriesDiff(g, w); d != "" {
						t.Fatalf("%s: Around(%s): %s", where, pl, d)
					}
				}
				scripted := calls.n.Load() > before
				if want := f&lb.FieldTieRank != 0; scripted != want {
					t.Fatalf("%s: shardnear.lua called: %v, want %v", where, scripted, want)
				}
			}
		}
	}

	// Reads during writes.
	const live, radius = 200, 3
	b := duringWrites(t, s, "around-live", live, 60, func(board string, _ *atomic.Int64, i, r int) error {
		pl := fmt.Sprint("q", (i*13+r)%live)
		es, err := s.Around(ctx, lb.View{Board: board}, pl, radius, lb.Only(0))
		if err != nil {
			return err
		}
		mine := false
		seen := map[string]bool{}
		for k, e := range es {
			mine = mine || e.PlayerID == pl
			if seen[e.PlayerID] {
				return fmt.Errorf("Around(%s) during writes: %s twice: %v", pl, e.PlayerID, entryIDs(es))
			}
			seen[e.PlayerID] = true
			if k > 0 && (e.Rank != es[k-1].Rank+1 || e.Score > es[k-1].Score) || e.Rank < 1 || e.Rank > live {
				return fmt.Errorf("Around(%s) during writes: %v", pl, entryIDs(es))
			}
		}
		if len(es) != 2*radius+1 || !mine {
			return fmt.Errorf("Around(%s) during writes: %d entries %v", pl, len(es), entryIDs(es))
		}
		return nil
	})
	page, err := s.Top(ctx, lb.View{Board: b.ID}, 0, live)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Entries {
		start := min(max(0, i-radius), live-1-2*radius)
		want := slices.Clone(page.Entries[start : start+2*radius+1])
		for k := range want {
			want[k].TieRank = 0 // not asked
		}
		got, err := s.Around(ctx, lb.View{Board: b.ID}, e.PlayerID, radius, lb.Only(lb.FieldUpdatedAt|lb.FieldMeta))
		if err != nil {
			t.Fatal(err)
		}
		if d := entriesDiff(got, want); d != "" {
			t.Fatalf("Around(%s) after the writes: %s", e.PlayerID, d)
		}
	}
}

// TestShardedPlainReadsSeeALostShard: when one shard of a board lost its keys (a failover to a replica that had
// not copied them, say), the plain reads answer NOT_FOUND as the scripts' definition check does (and a ledgered
// store then restores the board), never a rank or a window short of that shard's players.
func TestShardedPlainReadsSeeALostShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.SharedStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	s, _ := shardStore(t, rdb)
	b := mustBoard(t, s, lb.Board{ID: "lost", Shards: 3})
	ids := onShards(t, "l", 3, 20)
	var subs []lb.Submission
	for k, list := range ids {
		for i, id := range list {
			subs = append(subs, lb.Submission{Board: b.ID, Player: id, Score: float64(3*i + k)})
		}
	}
	if _, err := s.SubmitMany(ctx, subs); err != nil {
		t.Fatal(err)
	}
	v := lb.View{Board: b.ID}
	for _, opt := range []lb.ReadOption{lb.Only(0), lb.Only(lb.FieldUpdatedAt | lb.FieldMeta)} {
		if e, err := s.Rank(ctx, v, ids[0][5], opt); err != nil || e == nil || e.Rank != 45 {
			t.Fatalf("Rank before the loss = %+v, %v; want rank 45", e, err)
		}
	}
	// Shard 1 loses every key.
	base := s.ShardKeyBases(b)[1]
	keys, err := rdb.Keys(ctx, base+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("shard 1's keys: %v %v", keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	for _, opt := range []lb.ReadOption{lb.Only(0), lb.Only(lb.FieldUpdatedAt | lb.FieldMeta)} {
		e, err := s.Rank(ctx, v, ids[0][5], opt)
		if lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Rank after shard 1 lost its keys = %+v, %v; want NOT_FOUND", e, err)
		}
		p, err := s.Ranks(ctx, v, []string{ids[0][5], ids[2][3]}, opt)
		if lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Ranks after shard 1 lost its keys = %+v, %v; want NOT_FOUND", p, err)
		}
		es, err := s.Around(ctx, v, ids[2][3], 2, opt)
		if lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Around after shard 1 lost its keys = %v, %v; want NOT_FOUND", entryIDs(es), err)
		}
	}
}

// duringWrites makes a board of 3 shards (DESC, BEST) of live players q0.. with scores 0..9, and runs read from 8
// readers (reader r's i-th read, reads each) while 2 writers give players new best scores, each the board's best
// so far (top: that score plus one, at least); it returns the board once the readers are done and the writers
// stopped. A read's error fails the test.
func duringWrites(t *testing.T, s *lb.Store, id string, live, reads int,
	read func(board string, top *atomic.Int64, i, r int) error) *lb.Board {
	t.Helper()
	ctx := context.Background()
	b := mustBoard(t, s, lb.Board{ID: id, Shards: 3, Order: lb.Desc, Mode: lb.Best})
	var subs []lb.Submission
	for j := range live {
		subs = append(subs, lb.Submission{Board: b.ID, Player: fmt.Sprint("q", j), Score: float64(j % 10)})
	}
	if _, err := s.SubmitMany(ctx, subs); err != nil {
		t.Fatal(err)
	}
	var top atomic.Int64
	top.Store(10)
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				score := top.Add(1) - 1
				if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: fmt.Sprint("q", (i*7+w)%live),
					Score: float64(score)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := range reads {
				if err := read(b.ID, &top, i, r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	writers.Wait()
	return b
}
