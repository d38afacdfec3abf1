package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedSlotMigration: while six writers submit SUM deltas with eventIds (Submit and SubmitMany) to a board of
// 3 shards on a private 3-primary cluster, the slots of its three shards (shard 0 with the definition and the
// arrival counter among them) move to other primaries and two of them back (a reshard: SETSLOT IMPORTING/MIGRATING, MIGRATE of the keys in batches of 100, SETSLOT NODE everywhere;
// redistest.Cluster.MoveSlot). A submission that fails is sent again with its eventId until it is acknowledged, as
// a client would (go-redis itself follows MOVED and ASK and retries TRYAGAIN). Afterwards nothing acknowledged is
// lost or doubled: every player's total in both windows is the number of its acknowledged events, and Size and
// Top are the players submitted. S=1 (today's layout, one slot) runs the same as the control.
func TestShardedSlotMigration(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{3, 1} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			runSlotMigration(t, shards)
		})
	}
}

func runSlotMigration(t *testing.T, shards int) {
	ctx := context.Background()
	cl := redistest.Cluster(t)
	rdb := cl.Client(t)
	clock := &testClock{t: time.Date(2031, 7, 8, 9, 0, 0, 0, time.UTC)}
	s := lb.New(rdb, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
	def := lb.Board{ID: "moving", Mode: lb.Sum, Shards: shards, Windows: []lb.Window{lb.AllTime, lb.Daily}}
	mustBoard(t, s, def)
	const pool = 400

	var mu sync.Mutex
	acked := map[string]string{} // eventId -> player
	errorsSeen := map[string]int{}
	ack := func(id, player string) {
		mu.Lock()
		acked[id] = player
		mu.Unlock()
	}
	// submit sends one item until it is acknowledged (at most 30 s).
	submit := func(sub lb.Submission) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := s.Submit(ctx, sub)
			if err == nil {
				if r.Duplicate && r.Entry.Score < 1 {
					return fmt.Errorf("%s: duplicate reply with score %v", sub.EventID, r.Entry.Score)
				}
				ack(sub.EventID, sub.Player)
				return nil
			}
			mu.Lock()
			errorsSeen[errorKind(err)]++
			mu.Unlock()
			if c := lb.ErrorCode(err); c == lb.Invalid || c == lb.Conflict || time.Now().After(deadline) {
				return fmt.Errorf("%s never acknowledged: %w", sub.EventID, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Seed every player once, so that every shard has keys (and hundreds of eventId keys) to migrate.
	for i := range pool {
		if err := submit(lb.Submission{Board: def.ID, Player: fmt.Sprintf("m%d", i), Score: 1,
			EventID: fmt.Sprintf("seed-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werrs []error
	var progress sync.WaitGroup
	progress.Add(6)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			n := 0
			fail := func(err error) {
				mu.Lock()
				werrs = append(werrs, err)
				mu.Unlock()
			}
			for ; ; n++ {
				if n == 50 {
					progress.Done()
				}
				select {
				case <-stop:
					if n < 50 {
						progress.Done()
					}
					return
				default:
				}
				size := 1
				if rng.IntN(2) == 0 {
					size = 2 + rng.IntN(20)
				}
				batch := make([]lb.Submission, size)
				for i := range batch {
					batch[i] = lb.Submission{Board: def.ID, Player: fmt.Sprintf("m%d", rng.IntN(pool)), Score: 1,
						EventID: fmt.Sprintf("w%d-%d-%d", w, n, i)}
				}
				if size == 1 {
					if err := submit(batch[0]); err != nil {
						fail(err)
						return
					}
					continue
				}
				outs, err := s.SubmitMany(ctx, batch)
				for i, sub := range batch {
					if err == nil && outs[i].Err == nil {
						ack(sub.EventID, sub.Player)
						continue
					}
					if err == nil {
						mu.Lock()
						errorsSeen[errorKind(outs[i].Err)]++
						mu.Unlock()
					}
					if err := submit(sub); err != nil { // again, alone, until acknowledged
						fail(err)
						return
					}
				}
			}
		}()
	}

	progress.Wait() // every writer is under way
	var moveErr error
	var moves []string
	home := map[int]string{} // shard -> the primary that served its slot before it moved
	// move sends a shard's slot to another primary, or back home.
	move := func(shard int, back bool) {
		if moveErr != nil {
			return
		}
		slot := lb.HashSlot(lb.ShardKeyBase(s.Prefix(), def.ID, shard, max(shards, 1)))
		from, err := cl.SlotOwner(ctx, slot)
		if err != nil {
			moveErr = err
			return
		}
		to := home[shard]
		if !back {
			home[shard] = from
			for _, a := range cl.Addrs {
				if a != from {
					to = a
					break
				}
			}
		}
		start := time.Now()
		if err := cl.MoveSlot(ctx, slot, to); err != nil {
			moveErr = fmt.Errorf("moving slot %d of shard %d from %s to %s: %w (keys on both nodes: %v)", slot, shard,
				from, to, err, keysOnBoth(ctx, slot, from, to))
			return
		}
		moves = append(moves, fmt.Sprintf("shard %d slot %d %s -> %s in %v", shard, slot, from, to,
			time.Since(start).Round(time.Millisecond)))
	}
	if shards > 1 {
		move(1, false)
		move(0, false) // the definition and the board-wide arrival counter
		move(2, false)
		move(1, true)
		move(0, true)
	} else {
		move(0, false)
		move(0, true)
	}
	time.Sleep(200 * time.Millisecond) // writes after the last move
	close(stop)
	wg.Wait()
	mu.Lock()
	kinds := make([]string, 0, len(errorsSeen))
	for k, n := range errorsSeen {
		kinds = append(kinds, fmt.Sprintf("%dx %s", n, k))
	}
	mu.Unlock()
	sort.Strings(kinds)
	t.Logf("moves: %v; %d events acknowledged; errors seen by the writers (each retried): %v", moves, len(acked), kinds)
	if moveErr != nil {
		t.Fatalf("the migration failed: %v (errors seen by the writers: %v)", moveErr, kinds)
	}
	for _, err := range werrs {
		t.Errorf("writer: %v", err)
	}
	if t.Failed() {
		return
	}

	want := map[string]float64{}
	for _, p := range acked {
		want[p]++
	}
	fresh := lb.New(cl.Client(t), lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
	for _, w := range def.Windows {
		t.Run(string(w), func(t *testing.T) {
			checkSettled(t, fresh, lb.View{Board: def.ID, Window: w}, want)
		})
	}
}

// errorKind shortens an error to its kind for the log: its code and the first words of its text.
func errorKind(err error) string {
	msg := err.Error()
	if i := strings.IndexAny(msg, "0123456789"); i > 40 {
		msg = msg[:i]
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return string(lb.ErrorCode(err)) + ": " + msg
}

// keysOnBoth lists (at most 6 of) the keys of a slot that two nodes both hold: a write that reached the importing
// node for keys still on the migrating one.
func keysOnBoth(ctx context.Context, slot int, a, b string) []string {
	ca, cb := redis.NewClient(&redis.Options{Addr: a}), redis.NewClient(&redis.Options{Addr: b})
	defer ca.Close()
	defer cb.Close()
	ka, _ := ca.ClusterGetKeysInSlot(ctx, slot, 1_000_000).Result()
	kb, _ := cb.ClusterGetKeysInSlot(ctx, slot, 1_000_000).Result()
	in := map[string]bool{}
	for _, k := range ka {
		in[k] = true
	}
	var both []string
	for _, k := range kb {
		if in[k] {
			both = append(both, k)
		}
	}
	sort.Strings(both)
	return both[:min(6, len(both))]
}
