package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedExactTopGaps: on exactTop boards a player can leave its shard's exact tier other than by being
// passed (a drop on LATEST, a negative delta on SUM, a removal on any mode), leaving that shard's tier short while
// its tail holds players that may rank within the board's best exactTop. Every entry a sharded board reports as
// exact (top, rank, tieRank, aroundMe, friends, the export's rows, a submission's own) must be the player's true
// place (a model of the same submissions), top and the export list the exact tier only (consecutive ranks from 1,
// none estimated), and an estimated rank lies within the board. Before the fix, shard B's exact players were
// listed at ranks that shard A's tail players held (top, aroundMe, exports; ranks 2..exactTop reported exact
// and wrong), and a tail player was reported exact.
func TestShardedExactTopGaps(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	for _, c := range []struct {
		mode             lb.Mode
		order            lb.Order
		shards, exactTop int
	}{{lb.Latest, lb.Desc, 2, 3}, {lb.Latest, lb.Asc, 3, 3}, {lb.Sum, lb.Desc, 2, 3}, {lb.Sum, lb.Asc, 5, 3},
		{lb.Best, lb.Desc, 3, 3}, {lb.Latest, lb.Desc, 4, 6}, {lb.Sum, lb.Desc, 3, 8}, {lb.Latest, lb.Desc, 1, 3},
		{lb.Sum, lb.Desc, 1, 3}} {
		t.Run(fmt.Sprintf("%s-%s-S%d-X%d", c.mode, c.order, c.shards, c.exactTop), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, clock := shardStore(t, rdb)
			def := lb.Board{ID: "gaps", Mode: c.mode, Order: c.order, Shards: c.shards, ExactTop: c.exactTop}
			mustBoard(t, s, def)
			m := newShardModel(def)
			k := mKey{lb.AllTime, "all"}
			v := lb.View{Board: def.ID}
			players := make([]string, 14)
			for i := range players {
				players[i] = fmt.Sprintf("g%02d", i)
			}
			rng := rand.New(rand.NewPCG(uint64(c.shards), uint64(len(c.mode)+len(c.order)+c.exactTop)))
			for op := range 160 {
				clock.Set(clock.Now().Add(time.Second))
				pl := players[rng.IntN(len(players))]
				if rng.IntN(12) == 0 {
					got, err := s.RemovePlayer(ctx, def.ID, pl)
					if want := m.remove(pl); err != nil || got != want {
						t.Fatalf("op %d: RemovePlayer(%s) = %v, %v; want %v", op, pl, got, err, want)
					}
				} else {
					sc := float64(rng.IntN(9))
					if c.mode == lb.Sum {
						sc = float64(rng.IntN(9) - 4)
					}
					sub := lb.Submission{Board: def.ID, Player: pl, Score: sc}
					r, err := s.Submit(ctx, sub)
					if err != nil {
						if c.mode == lb.Sum && sc == 0 {
							continue
						}
						t.Fatalf("op %d: Submit(%s, %v): %v", op, pl, sc, err)
					}
					m.submit(sub, clock.Now())
					rank, tie, size := m.rankOf(k, pl)
					if r.Size != size || !r.Entry.Approximate && (r.Entry.Rank != rank || r.Entry.TieRank != tie) ||
						r.Entry.Approximate && (r.Entry.Rank < 1 || r.Entry.Rank > size) {
						t.Fatalf("op %d: Submit(%s, %v): rank %d tieRank %d approximate %v size %d; true rank %d "+
							"tieRank %d size %d", op, pl, sc, r.Entry.Rank, r.Entry.TieRank, r.Entry.Approximate,
							r.Size, rank, tie, size)
					}
				}
				if op%4 == 3 {
					checkGapReads(t, s, m, v, k, players, def.ExactTop, fmt.Sprintf("op %d", op))
				}
			}
			checkGapReads(t, s, m, v, k, players, def.ExactTop, "end")
		})
	}
}

// TestShardedExactTopRemovalGap: on a BEST board (exactTop 2, 2 shards), removing the best player of shard A
// leaves A's tier one short while its tail holds a player (8) better than shard B's exact ones (7, 6): the board's
// second place is that tail player, so top lists the first only, B's 7 is estimated third, and nothing is
// reported exact at a rank it does not hold.
func TestShardedExactTopRemovalGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := shardStore(t, shardClient(t))
	def := lb.Board{ID: "gap-rm", Mode: lb.Best, Shards: 2, ExactTop: 2}
	mustBoard(t, s, def)
	m := newShardModel(def)
	ps := onShards(t, "r", 2, 3)
	a, b := ps[0], ps[1]
	for _, sub := range []lb.Submission{{Player: a[0], Score: 10}, {Player: a[1], Score: 9}, {Player: a[2], Score: 8},
		{Player: b[0], Score: 7}, {Player: b[1], Score: 6}} {
		clock.Set(clock.Now().Add(time.Second))
		sub.Board = def.ID
		mustSubmit(t, s, sub)
		m.submit(sub, clock.Now())
	}
	if ok, err := s.RemovePlayer(ctx, def.ID, a[0]); !ok || err != nil {
		t.Fatalf("RemovePlayer(%s): %v, %v", a[0], ok, err)
	}
	m.remove(a[0])
	k, v := mKey{lb.AllTime, "all"}, lb.View{Board: def.ID}
	checkGapReads(t, s, m, v, k, append(a, b...), def.ExactTop, "after the removal")
	if ids := topIDs(t, s, v, 5); len(ids) != 1 || ids[0] != a[1] {
		t.Fatalf("top %v, want [%s] (the board's exact tier ends before shard A's tail)", ids, a[1])
	}
	// A submission of shard B's player is placed among A's tail too.
	clock.Set(clock.Now().Add(time.Second))
	sub := lb.Submission{Board: def.ID, Player: b[1], Score: 6.5}
	r := mustSubmit(t, s, sub)
	m.submit(sub, clock.Now())
	if !r.Entry.Approximate || r.Entry.Rank != 4 {
		t.Fatalf("Submit(%s, 6.5): rank %d approximate %v; want 4, estimated", b[1], r.Entry.Rank, r.Entry.Approximate)
	}
	checkGapReads(t, s, m, v, k, append(a, b...), def.ExactTop, "after B's submission")
}

// checkGapReads holds every read of a board with exactTop to model m (see TestShardedExactTopGaps).
func checkGapReads(t *testing.T, s *lb.Store, m *shardModel, v lb.View, k mKey, players []string, exactTop int,
	at string) {
	t.Helper()
	ctx := context.Background()
	rows, pos := m.ranking(k)
	n := int64(len(rows))
	// exact checks an entry: estimated within 1..n, else the player's true place, score and updatedAt.
	exact := func(what string, e lb.Entry) {
		t.Helper()
		i, ok := pos[e.PlayerID]
		if !ok {
			t.Fatalf("%s: %s lists %s, who has no score", at, what, e.PlayerID)
		}
		r := rows[i]
		if e.Score != r.e.score {
			t.Fatalf("%s: %s: %s score %v, want %v", at, what, e.PlayerID, e.Score, r.e.score)
		}
		if e.Approximate {
			if e.Rank < 1 || e.Rank > n || e.Rank <= int64(exactTop) && e.Rank < r.tieRank {
				t.Fatalf("%s: %s: %s estimated rank %d outside the board (size %d, true rank %d)", at, what,
					e.PlayerID, e.Rank, n, r.rank)
			}
			return
		}
		if e.Rank != r.rank || (e.TieRank != 0 && e.TieRank != r.tieRank) || !e.UpdatedAt.Equal(time.Unix(r.e.updated, 0)) {
			t.Fatalf("%s: %s: %s reported exact at rank %d tieRank %d updatedAt %v; true rank %d tieRank %d "+
				"updatedAt %v\nmodel: %s", at, what, e.PlayerID, e.Rank, e.TieRank, e.UpdatedAt, r.rank, r.tieRank,
				time.Unix(r.e.updated, 0).UTC(), modelRows(rows))
		}
	}
	listed := map[string]int64{}
	var tier []string // the board's exact tier, as top lists it
	p, err := s.Top(ctx, v, 0, 50)
	if err != nil || p.Size != n {
		t.Fatalf("%s: Top: %v, size %v (want %d)", at, err, p, n)
	}
	for i, e := range p.Entries {
		if e.Approximate || e.Rank != int64(i+1) || i >= exactTop {
			t.Fatalf("%s: Top entry %d: %+v (the exact tier only, ranks from 1)", at, i, e)
		}
		exact("Top", e)
		listed[e.PlayerID] = e.Rank
		tier = append(tier, e.PlayerID)
	}
	sn, err := s.Snapshot(ctx, v)
	if err != nil {
		t.Fatalf("%s: Snapshot: %v", at, err)
	}
	pg, err := sn.Page(ctx, 0, 50)
	sn.Close(ctx)
	if err != nil {
		t.Fatalf("%s: Snapshot page: %v", at, err)
	}
	for i, e := range pg.Entries {
		if e.Approximate || e.Rank != int64(i+1) {
			t.Fatalf("%s: export row %d: %+v (the exact tier only, ranks from 1)", at, i, e)
		}
		exact("export", e)
	}
	// rankForScore: a new player with score x ranks after every player with an equal or better score.
	for x := -12.0; x <= 12; x++ {
		est, err := s.RankForScore(ctx, v, x)
		if err != nil {
			t.Fatalf("%s: RankForScore(%v): %v", at, x, err)
		}
		rank, tie := int64(1), int64(1)
		for _, r := range rows {
			if r.e.score == x || m.better(r.e.score, x) {
				rank++
			}
			if m.better(r.e.score, x) {
				tie++
			}
		}
		if est.Size != n || !est.Approximate && (est.Rank != rank || est.TieRank != tie) ||
			est.Approximate && (est.Rank < 1 || est.Rank > n+1) {
			t.Fatalf("%s: RankForScore(%v) = %+v; true rank %d tieRank %d size %d\nmodel: %s", at, x, *est, rank, tie,
				n, modelRows(rows))
		}
	}
	for _, pl := range append(players, "absent") {
		e, err := s.Rank(ctx, v, pl)
		if err != nil {
			t.Fatalf("%s: Rank(%s): %v", at, pl, err)
		}
		_, has := pos[pl]
		if (e != nil) != has {
			t.Fatalf("%s: Rank(%s) = %+v; has a score: %v", at, pl, e, has)
		}
		if e == nil {
			continue
		}
		exact("Rank", *e)
		if r, ok := listed[pl]; ok != !e.Approximate || ok && e.Rank != r {
			t.Fatalf("%s: Rank(%s) = %d approximate %v; top lists it at %d (%v)", at, pl, e.Rank, e.Approximate, r, ok)
		}
		for _, radius := range []int{1, 3} {
			around, err := s.Around(ctx, v, pl, radius)
			if err != nil {
				t.Fatalf("%s: Around(%s): %v", at, pl, err)
			}
			var ids []string
			for i, a := range around {
				exact(fmt.Sprintf("Around(%s, %d)", pl, radius), a)
				if i > 0 && (a.Approximate || a.Rank != around[i-1].Rank+1) {
					t.Fatalf("%s: Around(%s, %d): %v", at, pl, radius, around)
				}
				ids = append(ids, a.PlayerID)
			}
			// In the exact tier: radius either side, shifted at its ends (as on a board of one shard); beyond
			// it, the player alone.
			want := []string{pl}
			if r, ok := listed[pl]; ok {
				start := max(0, int(r)-1-radius)
				stop := start + 2*radius
				if stop > len(tier)-1 {
					stop = len(tier) - 1
					start = max(0, stop-2*radius)
				}
				want = tier[start : stop+1]
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("%s: Around(%s, %d) = %v, want %v (exact tier %v)", at, pl, radius, ids, want, tier)
			}
		}
		fr, err := s.Friends(ctx, v, pl, append(players, "absent", pl))
		if err != nil {
			t.Fatalf("%s: Friends(%s): %v", at, pl, err)
		}
		if len(fr) != len(rows) {
			t.Fatalf("%s: Friends(%s): %d entries, want %d", at, pl, len(fr), len(rows))
		}
		for _, f := range fr {
			exact("Friends", f)
		}
	}
}

func modelRows(rows []mRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s:%v@%d ", r.id, r.e.score, r.rank)
	}
	return b.String()
}

// TestShardedExactTopGapRetry: a retry of a submission with an eventId gets its first result back, approximate
// included, also when the first was estimated within exactTop because another shard's tail may precede it
// (tailCut): shard A's tier {9, 8} is one short of exactTop 3 and its tail holds a 7; B's 7 arrived before it and
// is third, but A's tail may hold it (the cut is at 7), so it is estimated.
func TestShardedExactTopGapRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := shardStore(t, shardClient(t))
	def := lb.Board{ID: "gap-retry", Mode: lb.Latest, Shards: 2, ExactTop: 3}
	mustBoard(t, s, def)
	ps := onShards(t, "q", 2, 4)
	a, b := ps[0], ps[1]
	for _, sub := range []lb.Submission{{Player: a[0], Score: 10}, {Player: a[1], Score: 9}, {Player: a[2], Score: 8},
		{Player: b[0], Score: 7}, {Player: a[3], Score: 7}, {Player: a[0], Score: 1}} {
		clock.Set(clock.Now().Add(time.Second))
		sub.Board = def.ID
		mustSubmit(t, s, sub)
	}
	// B's 7 again (LATEST, the same score: it keeps its place), with an eventId, then its retry.
	sub := lb.Submission{Board: def.ID, Player: b[0], Score: 7, EventID: "again"}
	first := mustSubmit(t, s, sub)
	if first.Entry.Rank != 3 || !first.Entry.Approximate {
		t.Fatalf("first result: rank %d approximate %v; want 3, estimated (shard A's tail may hold a 7 before it)",
			first.Entry.Rank, first.Entry.Approximate)
	}
	retry := mustSubmit(t, s, sub)
	if !retry.Duplicate || retry.Entry.Rank != first.Entry.Rank || retry.Entry.Approximate != first.Entry.Approximate ||
		retry.Entry.TopPercent != first.Entry.TopPercent || retry.Size != first.Size {
		t.Fatalf("retry: %+v (duplicate %v, size %d); first %+v (size %d)", retry.Entry, retry.Duplicate, retry.Size,
			first.Entry, first.Size)
	}
	if e, err := s.Rank(ctx, lb.View{Board: def.ID}, b[0]); err != nil || e.Rank != 3 || !e.Approximate {
		t.Fatalf("Rank(%s): %+v, %v; want 3, estimated", b[0], e, err)
	}
}

// TestShardedExactTopGapClose: the close event of a period whose shard A's tier a drop left short carries the
// board's exact tier only (A's 9), as top lists it, and the closed period reads the same.
func TestShardedExactTopGapClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := shardStore(t, shardClient(t))
	def := lb.Board{ID: "gap-close", Mode: lb.Latest, Shards: 2, ExactTop: 2, Windows: []lb.Window{lb.Daily},
		CloseEventTop: 5}
	mustBoard(t, s, def)
	ps := onShards(t, "c", 2, 3)
	a, b := ps[0], ps[1]
	for _, sub := range []lb.Submission{{Player: a[0], Score: 10}, {Player: a[1], Score: 9}, {Player: a[2], Score: 8},
		{Player: b[0], Score: 7}, {Player: b[1], Score: 6}, {Player: a[0], Score: 1}} {
		clock.Set(clock.Now().Add(time.Second))
		sub.Board = def.ID
		mustSubmit(t, s, sub)
	}
	period := clock.Now().Format("2006-01-02")
	v := lb.View{Board: def.ID, Window: lb.Daily, Period: period}
	if _, _, err := s.RecordClose(ctx, def.ID, lb.Daily, period, clock.Now()); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Closes(ctx, def.ID, "0", 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("closes %v, %v", evs, err)
	}
	if ev := evs[0]; ev.Size != 5 || len(ev.Top) != 1 || ev.Top[0].PlayerID != a[1] || ev.Top[0].Rank != 1 ||
		ev.Top[0].Approximate {
		t.Fatalf("close event: size %d, top %+v; want 5 players, %s alone at rank 1", ev.Size, ev.Top, a[1])
	}
	if ids := topIDs(t, s, v, 5); len(ids) != 1 || ids[0] != a[1] {
		t.Fatalf("top of the closed period %v, want [%s]", ids, a[1])
	}
	if e, err := s.Rank(ctx, v, b[0]); err != nil || e.Rank != 3 || !e.Approximate {
		t.Fatalf("Rank(%s) in the closed period: %+v, %v; want 3, estimated", b[0], e, err)
	}
}
