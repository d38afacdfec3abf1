package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// moveSlotPausing is MoveSlot (the README's one-step move) with a pause while the slot is MIGRATING and
// IMPORTING with its keys still on the source, and one after its keys moved, before SETSLOT NODE: the source
// answers ASK for the moved keys, and requests follow the redirect, for the length of pause.
func moveSlotPausing(ctx context.Context, cl *redistest.RedisCluster, slot int, from, to string, pause time.Duration) error {
	src, dst := redis.NewClient(&redis.Options{Addr: from}), redis.NewClient(&redis.Options{Addr: to})
	defer src.Close()
	defer dst.Close()
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return err
	}
	time.Sleep(pause)
	host, port, _ := strings.Cut(to, ":")
	if err := redis.NewScript(`local n = 0
while true do
  local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', ARGV[1], 1000)
  if #keys == 0 then return n end
  redis.call('MIGRATE', ARGV[2], ARGV[3], '', 0, ARGV[4], 'KEYS', unpack(keys))
  n = n + #keys
end`).Run(ctx, src, nil, slot, host, port, 10000).Err(); err != nil {
		return fmt.Errorf("MIGRATE: %w", err)
	}
	time.Sleep(pause)
	// What MoveSlot does from here on: SETSLOT NODE everywhere, until every master agrees.
	return cl.MoveSlot(ctx, slot, to)
}

// TestShardedSlotMigrationReads: while writers submit SUM deltas of 1 to a board of 3 shards on a private
// 3-primary cluster and every shard's slot moves to another primary and back (MoveSlot, as in
// TestShardedSlotMigration), readers call Rank, Around and Friends (through the scripts, with tieRank, and the plain
// reads without it, with and without names) and Top. No read fails with anything but UNAVAILABLE (retry-able), and
// none loses a player: every player was seeded before, so each Rank finds it, Around lists it, Friends lists every
// friend and Top lists each player once, ranked 1..n in order.
func TestShardedSlotMigrationReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.Cluster(t)
	clock := &testClock{t: time.Date(2031, 7, 8, 9, 0, 0, 0, time.UTC)}
	s := lb.New(cl.Client(t), lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
	const shards, pool = 3, 3000 // enough keys that each MIGRATE takes a while
	def := lb.Board{ID: "moving-reads", Mode: lb.Sum, Shards: shards}
	mustBoard(t, s, def)
	v := lb.View{Board: def.ID}
	var seed []lb.Submission
	for i := range pool {
		seed = append(seed, lb.Submission{Board: def.ID, Player: fmt.Sprintf("r%d", i), Score: 1,
			DisplayName: ptr(fmt.Sprintf("n%d", i))})
	}
	for len(seed) > 0 {
		n := min(len(seed), 500)
		outs, err := s.SubmitMany(ctx, seed[:n])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
		}
		seed = seed[n:]
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	var retried, reads atomic.Int64
	fail := func(format string, args ...any) {
		mu.Lock()
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	// ok sorts a read's error: nil, UNAVAILABLE (counted, a client retries), or a failure.
	ok := func(what string, err error) bool {
		if err == nil {
			reads.Add(1)
			return true
		}
		if lb.ErrorCode(err) == lb.Unavailable {
			retried.Add(1)
			return false
		}
		fail("%s: %v (code %s)", what, err, lb.ErrorCode(err))
		return false
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = s.Submit(ctx, lb.Submission{Board: def.ID, Player: fmt.Sprintf("r%d", rng.IntN(pool)), Score: 1})
			}
		}()
	}
	optsOf := [][]lb.ReadOption{nil, {lb.Only(lb.FieldRank)}, {lb.Only(lb.FieldRank | lb.FieldUpdatedAt)}}
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("r%d", rng.IntN(pool))
				opts := optsOf[i%len(optsOf)]
				what := fmt.Sprintf("opts %d", i%len(optsOf))
				switch i % 4 {
				case 0:
					e, err := s.Rank(ctx, v, p, opts...)
					if ok("Rank "+what, err) && (e == nil || e.Rank < 1 || e.Rank > pool) {
						fail("Rank %s of %s = %+v: a seeded player missing or misplaced", what, p, e)
					}
				case 1:
					es, err := s.Around(ctx, v, p, 3, opts...)
					if ok("Around "+what, err) {
						found := false
						for k, e := range es {
							found = found || e.PlayerID == p
							if k > 0 && e.Rank != es[k-1].Rank+1 {
								fail("Around %s of %s: ranks %d then %d", what, p, es[k-1].Rank, e.Rank)
							}
						}
						if !found || len(es) < 4 {
							fail("Around %s of %s lists %d rows without it: %+v", what, p, len(es), es)
						}
					}
				case 2:
					friends := []string{fmt.Sprintf("r%d", rng.IntN(pool)), fmt.Sprintf("r%d", rng.IntN(pool))}
					es, err := s.Friends(ctx, v, p, friends, opts...)
					if ok("Friends "+what, err) {
						got := map[string]bool{}
						for _, e := range es {
							got[e.PlayerID] = true
						}
						for _, f := range append(friends, p) {
							if !got[f] {
								fail("Friends %s of %s %v: %s missing from %+v", what, p, friends, f, es)
							}
						}
					}
				case 3:
					page, err := s.Top(ctx, v, 0, 100)
					if ok("Top", err) {
						seen := map[string]bool{}
						for k, e := range page.Entries {
							if seen[e.PlayerID] || e.Rank != int64(k+1) || (k > 0 && e.Score > page.Entries[k-1].Score) {
								fail("Top row %d: %+v (seen before: %v)", k, e, seen[e.PlayerID])
							}
							seen[e.PlayerID] = true
						}
						if len(page.Entries) != 100 || page.Size != pool {
							fail("Top: %d rows, size %d", len(page.Entries), page.Size)
						}
					}
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	var moves []string
	for _, shard := range []int{1, 0, 2, 1, 0, 2} {
		slot := lb.HashSlot(lb.ShardKeyBase(s.Prefix(), def.ID, shard, shards))
		from, err := cl.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := cl.Addrs[0]
		for _, a := range cl.Addrs {
			if a != from {
				to = a
				break
			}
		}
		if err := moveSlotPausing(ctx, cl, slot, from, to, 300*time.Millisecond); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("moving shard %d's slot %d: %v", shard, slot, err)
		}
		moves = append(moves, fmt.Sprintf("shard %d: %s -> %s", shard, from, to))
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("moves %v; %d reads answered, %d UNAVAILABLE", moves, reads.Load(), retried.Load())
	for _, b := range bad {
		t.Error(b)
	}
}
