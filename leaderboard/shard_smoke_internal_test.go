package leaderboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

func TestShardSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "sh", Shards: 3})
			if err != nil {
				t.Fatal(err)
			}
			type m struct {
				score float64
				arr   int
			}
			model := map[string]*m{}
			arr := 0
			rng := rand.New(rand.NewPCG(1, 2))
			for round := 0; round < 20; round++ {
				var subs []Submission
				for i := 0; i < 50; i++ {
					p := fmt.Sprintf("p%d", rng.IntN(300))
					sc := float64(rng.IntN(10))
					subs = append(subs, Submission{Board: b.ID, Player: p, Score: sc})
				}
				out, err := s.SubmitMany(ctx, subs)
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range out {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					arr++
					cur := model[subs[i].Player]
					if cur == nil || subs[i].Score > cur.score {
						model[subs[i].Player] = &m{subs[i].Score, arr}
					}
				}
			}
			var ids []string
			for id := range model {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool {
				a, b := model[ids[i]], model[ids[j]]
				if a.score != b.score {
					return a.score > b.score
				}
				return a.arr < b.arr
			})
			p, err := s.Top(ctx, View{Board: b.ID}, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if p.Size != int64(len(ids)) || len(p.Entries) != len(ids) {
				t.Fatalf("size %d entries %d want %d", p.Size, len(p.Entries), len(ids))
			}
			for i, e := range p.Entries {
				if e.PlayerID != ids[i] || e.Rank != int64(i+1) || e.Score != model[ids[i]].score {
					t.Fatalf("row %d: %+v want %s %v", i, e, ids[i], model[ids[i]].score)
				}
				r, err := s.Rank(ctx, View{Board: b.ID}, e.PlayerID)
				if err != nil || r == nil || r.Rank != e.Rank || r.TieRank != e.TieRank {
					t.Fatalf("rank of %s: %+v %v want %d/%d", e.PlayerID, r, err, e.Rank, e.TieRank)
				}
			}
			for _, id := range []string{ids[0], ids[5], ids[len(ids)-1], ids[len(ids)/2]} {
				a, err := s.Around(ctx, View{Board: b.ID}, id, 3)
				if err != nil {
					t.Fatal(err)
				}
				r, _ := s.Rank(ctx, View{Board: b.ID}, id)
				start, stop := aroundWindow(r.Rank-1, int64(len(ids)), 3)
				if int64(len(a)) != stop-start+1 {
					t.Fatalf("around %s: %d rows want %d", id, len(a), stop-start+1)
				}
				for k, e := range a {
					want := p.Entries[start+int64(k)]
					if e.PlayerID != want.PlayerID || e.Rank != want.Rank || e.TieRank != want.TieRank {
						t.Fatalf("around %s row %d: %+v want %+v", id, k, e, want)
					}
				}
			}
			// A submission's result is its place on the whole board: equal to a read right after it, and its
			// previous rank to a read right before.
			for i := 0; i < 30; i++ {
				pl := ids[rng.IntN(len(ids))]
				before, err := s.Rank(ctx, View{Board: b.ID}, pl)
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.Submit(ctx, Submission{Board: b.ID, Player: pl, Score: before.Score + 1, EventID: fmt.Sprintf("e%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				after, err := s.Rank(ctx, View{Board: b.ID}, pl)
				if err != nil {
					t.Fatal(err)
				}
				if res.Entry.Rank != after.Rank || res.Entry.TieRank != after.TieRank || res.Size != p.Size ||
					res.PreviousRank == nil || *res.PreviousRank != before.Rank || !res.Updated {
					t.Fatalf("submit %s: %+v prev %v; read before %+v after %+v", pl, res.Entry, res.PreviousRank, before, after)
				}
				model[pl].score++
				arr++
				model[pl].arr = 1<<30 + arr
			}
			sort.Slice(ids, func(i, j int) bool {
				a, b := model[ids[i]], model[ids[j]]
				if a.score != b.score {
					return a.score > b.score
				}
				return a.arr < b.arr
			})
			if p, err = s.Top(ctx, View{Board: b.ID}, 0, 1000); err != nil {
				t.Fatal(err)
			}
			for i, e := range p.Entries {
				if e.PlayerID != ids[i] || e.Score != model[ids[i]].score {
					t.Fatalf("row %d after the singles: %+v want %s", i, e, ids[i])
				}
			}
			sn, err := s.Snapshot(ctx, View{Board: b.ID})
			if err != nil {
				t.Fatal(err)
			}
			// A write after the snapshot is not in it.
			if _, err := s.Submit(ctx, Submission{Board: b.ID, Player: "late", Score: 100}); err != nil {
				t.Fatal(err)
			}
			var got []Entry
			for off := 0; ; off += 7 {
				pg, err := sn.Page(ctx, off, 7)
				if err != nil {
					t.Fatal(err)
				}
				if len(pg.Entries) == 0 {
					break
				}
				got = append(got, pg.Entries...)
			}
			if len(got) != len(p.Entries) || sn.Size != p.Size {
				t.Fatalf("export: %d rows size %d want %d", len(got), sn.Size, len(p.Entries))
			}
			for i, e := range got {
				w := p.Entries[i]
				if e.PlayerID != w.PlayerID || e.Rank != w.Rank || e.TieRank != w.TieRank || e.Score != w.Score ||
					!e.UpdatedAt.Equal(w.UpdatedAt) || e.TopPercent != w.TopPercent {
					t.Fatalf("export row %d: %+v want %+v", i, e, w)
				}
			}
			if err := sn.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RemovePlayer(ctx, b.ID, "late"); err != nil {
				t.Fatal(err)
			}
			for sc := -1.0; sc <= 10; sc++ {
				var ge, gt int64
				for _, m := range model {
					if m.score >= sc {
						ge++
					}
					if m.score > sc {
						gt++
					}
				}
				e, err := s.RankForScore(ctx, View{Board: b.ID}, sc)
				if err != nil || e.Rank != ge+1 || e.TieRank != gt+1 || e.Size != int64(len(ids)) {
					t.Fatalf("rank for %v: %+v %v want %d/%d", sc, e, err, ge+1, gt+1)
				}
			}
			if _, err := s.DeleteBoard(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
			for _, base := range s.shardBases(b.ID, 3) {
				keys, _ := tg.Client.Keys(ctx, globEscape(base)+"*").Result()
				if len(keys) > 0 && tg.Name == "standalone" {
					t.Fatalf("left %v", keys)
				}
			}
		})
	}
}

func TestShardCloseSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "shc", Shards: 5, Windows: []Window{Daily}, CloseEventTop: 7})
			if err != nil {
				t.Fatal(err)
			}
			var subs []Submission
			for i := 0; i < 40; i++ {
				subs = append(subs, Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 4)})
			}
			if _, err := s.SubmitMany(ctx, subs); err != nil {
				t.Fatal(err)
			}
			period := periodKey(Daily, periodStart(Daily, now, time.UTC))
			want, err := s.Top(ctx, View{Board: b.ID, Window: Daily, Period: period}, 0, 7)
			if err != nil {
				t.Fatal(err)
			}
			id, rec, err := s.RecordClose(ctx, b.ID, Daily, period, now)
			if err != nil || !rec || id == "" {
				t.Fatalf("close: %q %v %v", id, rec, err)
			}
			evs, err := s.Closes(ctx, b.ID, "0", 10)
			if err != nil || len(evs) != 1 {
				t.Fatalf("closes %v %v", evs, err)
			}
			if evs[0].Size != 40 || len(evs[0].Top) != 7 {
				t.Fatalf("event %+v", evs[0])
			}
			for i, e := range evs[0].Top {
				w := want.Entries[i]
				if e.PlayerID != w.PlayerID || e.Rank != w.Rank || e.TieRank != w.TieRank || e.Score != w.Score {
					t.Fatalf("top %d: %+v want %+v", i, e, w)
				}
			}
			// Every shard is fenced: a score for the closed period is refused on each.
			for i := 0; i < 40; i++ {
				_, err := s.Submit(ctx, Submission{Board: b.ID, Player: fmt.Sprintf("q%d", i), Score: 9})
				if ErrorCode(err) != PeriodClosed {
					t.Fatalf("q%d (shard %d): %v", i, ShardOf(fmt.Sprintf("q%d", i), 5), err)
				}
			}
			ps, err := s.Periods(ctx, b.ID, Daily)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Period == period && p.Size != 40 {
					t.Fatalf("periods: %+v", ps)
				}
			}
			id2, rec2, err := s.RecordClose(ctx, b.ID, Daily, period, now)
			if err != nil || rec2 || id2 != id {
				t.Fatalf("second close: %q %v %v", id2, rec2, err)
			}
		})
	}
}

func TestShardSeasonSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "shs", Shards: 4, Windows: []Window{Season}, Grace: -1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.StartSeason(ctx, b.ID, "s1", now.Add(24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 30; i++ {
				if _, err := s.Submit(ctx, Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 3)}); err != nil {
					t.Fatal(err)
				}
			}
			p, err := s.Top(ctx, View{Board: b.ID, Window: Season}, 0, 100)
			if err != nil || p.Size != 30 || len(p.Entries) != 30 || p.Period != "s1" {
				t.Fatalf("top: %+v %v", p, err)
			}
			// Ties by arrival: p2 (score 2) arrived first among the 2s.
			if p.Entries[0].PlayerID != "p2" || p.Entries[1].PlayerID != "p5" || p.Entries[0].TieRank != 1 ||
				p.Entries[1].TieRank != 1 || p.Entries[10].TieRank != 11 {
				t.Fatalf("top order: %+v", p.Entries[:3])
			}
			now = now.Add(time.Hour)
			if _, err := s.EndSeason(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 30; i++ {
				_, err := s.Submit(ctx, Submission{Board: b.ID, Player: fmt.Sprintf("q%d", i), Score: 5})
				if ErrorCode(err) != PeriodClosed {
					t.Fatalf("q%d after the season's end: %v", i, err)
				}
			}
		})
	}
}

func TestShardExactTopSmoke(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			const E = 20
			b, err := s.CreateBoard(ctx, Board{ID: "she", Shards: 3, ExactTop: E})
			if err != nil {
				t.Fatal(err)
			}
			score := map[string]float64{}
			arr := map[string]int{}
			var subs []Submission
			for i := 0; i < 300; i++ {
				p := fmt.Sprintf("p%d", i)
				score[p], arr[p] = float64((i*37)%50), i
				subs = append(subs, Submission{Board: b.ID, Player: p, Score: score[p]})
			}
			if _, err := s.SubmitMany(ctx, subs); err != nil {
				t.Fatal(err)
			}
			ids := make([]string, 0, len(score))
			for p := range score {
				ids = append(ids, p)
			}
			sort.Slice(ids, func(i, j int) bool {
				a, b := ids[i], ids[j]
				if score[a] != score[b] {
					return score[a] > score[b]
				}
				return arr[a] < arr[b]
			})
			top, err := s.Top(ctx, View{Board: b.ID}, 0, 100)
			if err != nil || len(top.Entries) != E || top.Size != 300 {
				t.Fatalf("top: %d rows, size %d, %v", len(top.Entries), top.Size, err)
			}
			for i, e := range top.Entries {
				if e.PlayerID != ids[i] || e.Rank != int64(i+1) || e.Approximate {
					t.Fatalf("top %d: %+v want %s", i, e, ids[i])
				}
			}
			for i, p := range ids {
				e, err := s.Rank(ctx, View{Board: b.ID}, p)
				if err != nil || e == nil {
					t.Fatalf("rank %s: %v", p, err)
				}
				var better int64
				for _, q := range ids {
					if score[q] > score[p] {
						better++
					}
				}
				if i < E {
					if e.Rank != int64(i+1) || e.Approximate || e.TieRank != better+1 {
						t.Fatalf("exact %s: %+v want rank %d tie %d", p, e, i+1, better+1)
					}
				} else if !e.Approximate || e.Rank < better+1 || e.Rank > int64(i+1) {
					t.Fatalf("tail %s: %+v want approximate within %d..%d", p, e, better+1, i+1)
				}
				a, err := s.Around(ctx, View{Board: b.ID}, p, 2)
				if err != nil {
					t.Fatal(err)
				}
				if i >= E && (len(a) != 1 || a[0].PlayerID != p) {
					t.Fatalf("around tail %s: %+v", p, a)
				}
				if i < E {
					start, stop := aroundWindow(int64(i), E, 2)
					if int64(len(a)) != stop-start+1 || a[int64(i)-start].PlayerID != p {
						t.Fatalf("around %s: %+v", p, a)
					}
				}
			}
		})
	}
}

// An eventId's record lives on its player's shard: a retry is recognised, and an eventId used again for another
// player is a conflict on that shard only.
func TestShardEventIDs(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
			b, err := s.CreateBoard(ctx, Board{ID: "shev", Shards: 4})
			if err != nil {
				t.Fatal(err)
			}
			var same, other string // players on p0's shard and on another one
			for i := 1; same == "" || other == ""; i++ {
				p := fmt.Sprintf("p%d", i)
				if ShardOf(p, 4) == ShardOf("p0", 4) {
					same = p
				} else {
					other = p
				}
			}
			r1, err := s.Submit(ctx, Submission{Board: b.ID, Player: "p0", Score: 5, EventID: "ev"})
			if err != nil || r1.Duplicate {
				t.Fatalf("first: %+v %v", r1, err)
			}
			r2, err := s.Submit(ctx, Submission{Board: b.ID, Player: "p0", Score: 5, EventID: "ev"})
			if err != nil || !r2.Duplicate || r2.Entry.Rank != 1 {
				t.Fatalf("retry: %+v %v", r2, err)
			}
			if _, err := s.Submit(ctx, Submission{Board: b.ID, Player: same, Score: 5, EventID: "ev"}); ErrorCode(err) != Conflict {
				t.Fatalf("another player on the shard: %v", err)
			}
			if r, err := s.Submit(ctx, Submission{Board: b.ID, Player: other, Score: 5, EventID: "ev"}); err != nil || r.Duplicate {
				t.Fatalf("another player on another shard: %+v %v", r, err)
			}
		})
	}
}

// Arrival numbers stay below 2^53 (the scripts hold them in doubles): past it a sharded board refuses submissions.
func TestShardArrivalsBound(t *testing.T) {
	ctx := context.Background()
	tg := redistest.Targets(t)[0]
	s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
	b, err := s.CreateBoard(ctx, Board{ID: "sharr", Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetBoardArrivals(ctx, s, b.ID, 1<<53-3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, Submission{Board: b.ID, Player: "a", Score: 1}); err != nil {
		t.Fatalf("arrival 2^53-2: %v", err)
	}
	out, err := s.SubmitMany(ctx, []Submission{{Board: b.ID, Player: "b", Score: 1}, {Board: b.ID, Player: "c", Score: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if ErrorCode(o.Err) != Internal {
			t.Fatalf("arrivals 2^53-1 and 2^53: %+v", o)
		}
	}
	if n, err := s.Size(ctx, View{Board: b.ID}); err != nil || n != 1 {
		t.Fatalf("size %d %v, want 1", n, err)
	}
}

// Shard i's slot is in the i-th of S equal slot ranges counted from shard 0's (ShardKeyBase), so the shards of a
// board spread over primaries that hold ranges of slots.
func TestShardSlotsSpread(t *testing.T) {
	for _, shards := range []int{1, 2, 3, 5, 7, 16, 63, 64} {
		for slot := range 16384 {
			if got, want := slotRange(slot, shards), rangeOf(slot, shards); got != want {
				t.Fatalf("slot %d of %d ranges: %d, want %d", slot, shards, got, want)
			}
		}
	}
	for _, shards := range []int{2, 3, 7, 16, 64} {
		for n := range 200 {
			id := fmt.Sprintf("board-%d", n)
			home := rangeOf(HashSlot(ShardKeyBase("lb", id, 0, shards)), shards)
			seen := map[int]bool{}
			for i := range shards {
				r := rangeOf(HashSlot(ShardKeyBase("lb", id, i, shards)), shards)
				if r != (home+i)%shards || seen[r] {
					t.Fatalf("%s, %d shards: shard %d in range %d (shard 0 in %d)", id, shards, i, r, home)
				}
				seen[r] = true
			}
		}
	}
}

// rangeOf is the range of the slot space that holds slot, found by walking the ranges' bounds (slotRange's oracle).
func rangeOf(slot, shards int) int {
	for r := range shards {
		if slot >= r*16384/shards && slot < (r+1)*16384/shards {
			return r
		}
	}
	return -1
}

// roundTrips counts a client's round trips: each command sent alone and each pipeline, but a new connection's
// handshake (HELLO, CLIENT SETINFO: parallel reads may open connections).
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) count(cmd redis.Cmder) {
	if name := cmd.Name(); name != "hello" && name != "client" {
		h.n.Add(1)
	}
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			h.count(cmds[0])
		}
		return next(ctx, cmds)
	}
}

// The round trips of a sharded board's requests, as the README gives them: top and size one; rank, friends and
// aroundMe three by plain reads, aroundMe four with names or updatedAt; with tie ranks (scripts) rank and friends
// two, aroundMe three; a submission three (its arrival number, its shard, its place on the others), four with an
// eventId (its first result stored).
func TestShardRoundTrips(t *testing.T) {
	ctx := context.Background()
	srv := redistest.SharedStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := New(rdb, Config{Prefix: redistest.Prefix(t)})
	b, err := s.CreateBoard(ctx, Board{ID: "rt", Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := s.Submit(ctx, Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 5)}); err != nil {
			t.Fatal(err)
		}
	}
	h := &roundTrips{}
	rdb.AddHook(h)
	v := View{Board: b.ID}
	for _, c := range []struct {
		name string
		want int64
		op   func() error
	}{
		{"top", 1, func() error { _, err := s.Top(ctx, v, 0, 10); return err }},
		{"size", 1, func() error { _, err := s.Size(ctx, v); return err }},
		{"rank", 3, func() error { _, err := s.Rank(ctx, v, "p7", Only(FieldUpdatedAt|FieldMeta)); return err }},
		{"rank with a tie rank", 2, func() error { _, err := s.Rank(ctx, v, "p7"); return err }},
		// Three in a row, the first two on each shard with players at once (p1, p2, p3 and p7 are on all three):
		// the hook counts 2 × 3 + 1.
		{"friends", 7, func() error {
			_, err := s.Friends(ctx, v, "p7", []string{"p1", "p2", "p3"}, Only(FieldMeta))
			return err
		}},
		{"friends with tie ranks", 2, func() error { _, err := s.Friends(ctx, v, "p7", []string{"p1", "p2", "p3"}); return err }},
		// Three in a row, the third a transaction on each shard at once: the hook counts 2 + 3.
		{"aroundMe", 5, func() error { _, err := s.Around(ctx, v, "p7", 3, Only(0)); return err }},
		{"aroundMe with names and updatedAt", 6, func() error {
			_, err := s.Around(ctx, v, "p7", 3, Only(FieldUpdatedAt|FieldMeta))
			return err
		}},
		{"aroundMe with tie ranks", 3, func() error { _, err := s.Around(ctx, v, "p7", 3); return err }},
		{"submit", 3, func() error {
			_, err := s.Submit(ctx, Submission{Board: b.ID, Player: "p8", Score: 9})
			return err
		}},
		{"submit with an eventId", 4, func() error {
			_, err := s.Submit(ctx, Submission{Board: b.ID, Player: "p9", Score: 9, EventID: "e1"})
			return err
		}},
	} {
		// Reads once before counting: a plain read's first read of a period also reads its record layout, once.
		if !strings.HasPrefix(c.name, "submit") {
			if err := c.op(); err != nil {
				t.Fatal(err)
			}
		}
		before := h.n.Load()
		if err := c.op(); err != nil {
			t.Fatal(err)
		}
		if got := h.n.Load() - before; got != c.want {
			t.Errorf("%s: %d round trips, want %d", c.name, got, c.want)
		}
	}
}
