package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// The twin-board oracle: an unsharded board and sharded twins of it (same definition, other shard counts) take
// the same submissions in the same order, one at a time; every read of the twins must then answer what the
// unsharded board answers, field by field (the README: reads of a sharded board are exact and identical to an
// unsharded board given the same submissions in the same order).

// twinShards are the shard counts of the twins of an unsharded board.
var twinShards = []int{2, 3, 7, 16, 64}

type twins struct {
	t      *testing.T
	s      *lb.Store
	clock  *testClock
	def    lb.Board
	ids    []string // ids[0]: the unsharded board; ids[i]: the twin of twinShards[i-1] shards
	shards []int
}

func newTwins(t *testing.T, s *lb.Store, clock *testClock, def lb.Board) *twins {
	t.Helper()
	tw := &twins{t: t, s: s, clock: clock, def: def, shards: append([]int{1}, twinShards...)}
	for _, sh := range tw.shards {
		d := def
		d.Shards = sh
		d.ID = fmt.Sprintf("%s~%d", def.ID, sh)
		mustBoard(t, s, d)
		tw.ids = append(tw.ids, d.ID)
	}
	return tw
}

// skipTwinsUnderRace skips a twin test under -race (redistest.WithoutRace: its submissions and reads go one at a
// time and take about a minute on 2 cores with it) or -short.
func skipTwinsUnderRace(t *testing.T) {
	if testing.Short() {
		t.Skip("sequential reads for about a minute on 2 cores")
	}
	redistest.WithoutRace(t)
}

// errCode is an error's code, or "" for none.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	if c := lb.ErrorCode(err); c != "" {
		return string(c)
	}
	return "UNCODED: " + err.Error()
}

// twinEntryDiff compares a twin's entry with the unsharded board's, field by field (scores bit by bit). An
// estimated rank may differ (each shard's histogram estimates its own tail), within 1..size and beyond exactTop.
func (tw *twins) twinEntryDiff(got, want lb.Entry, size int64) string {
	var d []string
	if got.PlayerID != want.PlayerID {
		d = append(d, fmt.Sprintf("playerId %q, want %q", got.PlayerID, want.PlayerID))
	}
	if got.Approximate != want.Approximate {
		d = append(d, fmt.Sprintf("approximate %v, want %v", got.Approximate, want.Approximate))
	}
	if want.Approximate {
		if got.Rank <= int64(tw.def.ExactTop) || got.Rank > max(size, 1) {
			d = append(d, fmt.Sprintf("estimated rank %d outside exactTop %d .. size %d", got.Rank, tw.def.ExactTop, size))
		}
	} else {
		if got.Rank != want.Rank {
			d = append(d, fmt.Sprintf("rank %d, want %d", got.Rank, want.Rank))
		}
		if got.TieRank != want.TieRank {
			d = append(d, fmt.Sprintf("tieRank %d, want %d", got.TieRank, want.TieRank))
		}
		if got.TopPercent != want.TopPercent {
			d = append(d, fmt.Sprintf("topPercent %v, want %v", got.TopPercent, want.TopPercent))
		}
	}
	if math.Float64bits(got.Score) != math.Float64bits(want.Score) {
		d = append(d, fmt.Sprintf("score %v (%x), want %v (%x)", got.Score, math.Float64bits(got.Score), want.Score,
			math.Float64bits(want.Score)))
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		d = append(d, fmt.Sprintf("updatedAt %v, want %v", got.UpdatedAt, want.UpdatedAt))
	}
	if strp(got.DisplayName) != strp(want.DisplayName) {
		d = append(d, fmt.Sprintf("displayName %v, want %v", strp(got.DisplayName), strp(want.DisplayName)))
	}
	if string(got.Metadata) != string(want.Metadata) {
		d = append(d, fmt.Sprintf("metadata %s, want %s", got.Metadata, want.Metadata))
	}
	return strings.Join(d, "; ")
}

func (tw *twins) entriesDiff(got, want []lb.Entry, size int64) string {
	got, want = tailSorted(got), tailSorted(want)
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries %v, want %d %v", len(got), entryIDs(got), len(want), entryIDs(want))
	}
	for i := range got {
		if d := tw.twinEntryDiff(got[i], want[i], size); d != "" {
			return fmt.Sprintf("entry %d (%s): %s", i, want[i].PlayerID, d)
		}
	}
	return ""
}

// tailSorted orders each run of estimated entries with one score by player id: their estimated ranks may tie,
// and their order among themselves is the estimate's.
func tailSorted(es []lb.Entry) []lb.Entry {
	es = slices.Clone(es)
	for i := 0; i < len(es); {
		j := i + 1
		for j < len(es) && es[i].Approximate && es[j].Approximate && es[j].Score == es[i].Score {
			j++
		}
		slices.SortFunc(es[i:j], func(a, b lb.Entry) int { return strings.Compare(a.PlayerID, b.PlayerID) })
		i = j
	}
	return es
}

func (tw *twins) resultDiff(got, want *lb.Result) string {
	if (got == nil) != (want == nil) {
		return fmt.Sprintf("result %v, want %v", got, want)
	}
	if got == nil {
		return ""
	}
	var d []string
	if e := tw.twinEntryDiff(got.Entry, want.Entry, want.Size); e != "" {
		d = append(d, "entry: "+e)
	}
	if got.Window != want.Window || got.Period != want.Period || got.Updated != want.Updated ||
		got.Duplicate != want.Duplicate || got.Size != want.Size {
		d = append(d, fmt.Sprintf("window %s period %s updated %v duplicate %v size %d; want %s %s %v %v %d",
			got.Window, got.Period, got.Updated, got.Duplicate, got.Size, want.Window, want.Period, want.Updated,
			want.Duplicate, want.Size))
	}
	exactPrev := want.PreviousRank == nil || tw.def.ExactTop == 0 || *want.PreviousRank <= int64(tw.def.ExactTop)
	if exactPrev && fmt.Sprint(deref(got.PreviousRank)) != fmt.Sprint(deref(want.PreviousRank)) {
		d = append(d, fmt.Sprintf("previousRank %v, want %v", deref(got.PreviousRank), deref(want.PreviousRank)))
	}
	if fmt.Sprint(deref(got.PreviousScore)) != fmt.Sprint(deref(want.PreviousScore)) {
		d = append(d, fmt.Sprintf("previousScore %v, want %v", deref(got.PreviousScore), deref(want.PreviousScore)))
	}
	return strings.Join(d, "; ")
}

func deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// submit sends sub to every twin and holds each result (or error code) to the unsharded board's.
func (tw *twins) submit(sub lb.Submission, opts ...lb.ReadOption) *lb.Result {
	tw.t.Helper()
	ctx := context.Background()
	var want *lb.Result
	var wantErr string
	for i, id := range tw.ids {
		sub.Board = id
		got, err := tw.s.Submit(ctx, sub, opts...)
		if i == 0 {
			want, wantErr = got, errCode(err)
			if strings.HasPrefix(wantErr, "UNCODED") {
				tw.t.Fatalf("Submit(%+v) on the unsharded board: %s", sub, wantErr)
			}
			continue
		}
		if c := errCode(err); c != wantErr {
			tw.t.Fatalf("Submit(%q, %v, event %q) on %d shards: error %q, unsharded %q", sub.Player, sub.Score,
				sub.EventID, tw.shards[i], c, wantErr)
		}
		if d := tw.resultDiff(got, want); d != "" {
			tw.t.Fatalf("Submit(%q, %v, event %q) on %d shards: %s\ngot  %+v prev %v\nwant %+v prev %v", sub.Player,
				sub.Score, sub.EventID, tw.shards[i], d, got.Entry, deref(got.PreviousRank), want.Entry,
				deref(want.PreviousRank))
		}
	}
	return want
}

// submitMany sends subs to every twin in one call each, compares the outcomes and returns the unsharded board's.
func (tw *twins) submitMany(subs []lb.Submission) []lb.Outcome {
	tw.t.Helper()
	ctx := context.Background()
	var want []lb.Outcome
	for i, id := range tw.ids {
		batch := slices.Clone(subs)
		for j := range batch {
			batch[j].Board = id
		}
		got, err := tw.s.SubmitMany(ctx, batch)
		if err != nil {
			tw.t.Fatalf("SubmitMany on %d shards: %v", tw.shards[i], err)
		}
		if i == 0 {
			want = got
			continue
		}
		for j := range got {
			if c, w := errCode(got[j].Err), errCode(want[j].Err); c != w {
				tw.t.Fatalf("SubmitMany item %d (%q) on %d shards: error %q, unsharded %q", j, subs[j].Player,
					tw.shards[i], c, w)
			}
			if d := tw.resultDiff(got[j].Result, want[j].Result); d != "" {
				tw.t.Fatalf("SubmitMany item %d (%q, %v) on %d shards: %s", j, subs[j].Player, subs[j].Score,
					tw.shards[i], d)
			}
		}
	}
	return want
}

func (tw *twins) remove(player string) {
	tw.t.Helper()
	var want bool
	for i, id := range tw.ids {
		got, err := tw.s.RemovePlayer(context.Background(), id, player)
		if err != nil {
			tw.t.Fatalf("RemovePlayer(%q) on %d shards: %v", player, tw.shards[i], err)
		}
		if i == 0 {
			want = got
		} else if got != want {
			tw.t.Fatalf("RemovePlayer(%q) on %d shards: %v, unsharded %v", player, tw.shards[i], got, want)
		}
	}
}

// each calls read on every board with its view of (w, p) and compares what it returns through cmp.
func twinRead[T any](tw *twins, what string, w lb.Window, p string, read func(v lb.View) (T, error),
	cmp func(got, want T) string) T {
	tw.t.Helper()
	var want T
	var wantErr string
	for i, id := range tw.ids {
		got, err := read(lb.View{Board: id, Window: w, Period: p})
		c := errCode(err)
		if strings.HasPrefix(c, "UNCODED") {
			tw.t.Fatalf("%s on %d shards: %s", what, tw.shards[i], c)
		}
		if i == 0 {
			want, wantErr = got, c
			continue
		}
		if c != wantErr {
			tw.t.Fatalf("%s on %d shards: error %q, unsharded %q", what, tw.shards[i], c, wantErr)
		}
		if err == nil {
			if d := cmp(got, want); d != "" {
				tw.t.Fatalf("%s on %d shards: %s\ngot  %+v\nwant %+v", what, tw.shards[i], d, got, want)
			}
		}
	}
	return want
}

// check compares every read of window w, period p over the given players (present or not).
func (tw *twins) check(w lb.Window, p string, players []string) {
	tw.t.Helper()
	ctx := context.Background()
	vs := fmt.Sprintf("[%s %s]", w, p)
	size := twinRead(tw, "Size "+vs, w, p, func(v lb.View) (int64, error) { return tw.s.Size(ctx, v) },
		func(got, want int64) string {
			if got != want {
				return fmt.Sprintf("size %d, want %d", got, want)
			}
			return ""
		})
	pageCmp := func(got, want *lb.Page) string {
		if got.Size != want.Size || got.Window != want.Window || got.Period != want.Period || got.Order != want.Order {
			return fmt.Sprintf("page %s %s %s size %d, want %s %s %s size %d", got.Window, got.Period, got.Order,
				got.Size, want.Window, want.Period, want.Order, want.Size)
		}
		return tw.entriesDiff(got.Entries, want.Entries, want.Size)
	}
	n := int(size)
	for _, pg := range [][2]int{{0, lb.MaxFirst}, {0, 0}, {0, 1}, {1, 3}, {max(n-1, 0), 5}, {n, 3}, {n + 50, 10},
		{max(n-3, 0), lb.MaxFirst}} {
		twinRead(tw, fmt.Sprintf("Top(%d, %d) %s", pg[0], pg[1], vs), w, p,
			func(v lb.View) (*lb.Page, error) { return tw.s.Top(ctx, v, pg[0], pg[1]) }, pageCmp)
	}
	entryCmp := func(got, want *lb.Entry) string {
		if (got == nil) != (want == nil) {
			return fmt.Sprintf("entry %+v, want %+v", got, want)
		}
		if got == nil {
			return ""
		}
		return tw.twinEntryDiff(*got, *want, size)
	}
	listCmp := func(got, want []lb.Entry) string { return tw.entriesDiff(got, want, size) }
	fieldSets := [][]lb.ReadOption{nil, {lb.Only(0)}, {lb.Only(lb.FieldUpdatedAt)}, {lb.Only(lb.FieldMeta)},
		{lb.Only(lb.FieldTieRank)}}
	for _, pl := range players {
		for fi, opts := range fieldSets {
			twinRead(tw, fmt.Sprintf("Rank(%q) fields#%d %s", pl, fi, vs), w, p,
				func(v lb.View) (*lb.Entry, error) { return tw.s.Rank(ctx, v, pl, opts...) }, entryCmp)
		}
		for _, radius := range []int{0, 2, lb.MaxRadius} {
			for fi, opts := range fieldSets {
				if radius != 2 && fi > 1 {
					continue
				}
				twinRead(tw, fmt.Sprintf("Around(%q, %d) fields#%d %s", pl, radius, fi, vs), w, p,
					func(v lb.View) ([]lb.Entry, error) { return tw.s.Around(ctx, v, pl, radius, opts...) }, listCmp)
			}
		}
	}
	// Friends: every player's friends are the others (with repeats, unknown ids and the player), in some order.
	rng := rand.New(rand.NewPCG(uint64(len(players)), 7))
	for c, pl := range players {
		if c > 3 {
			break
		}
		var fr []string
		for range 1 + rng.IntN(len(players)+1) {
			fr = append(fr, players[rng.IntN(len(players))])
		}
		fr = append(fr, "unknown-friend", pl, fr[0])
		for fi, opts := range fieldSets {
			twinRead(tw, fmt.Sprintf("Friends(%q, %d ids) fields#%d %s", pl, len(fr), fi, vs), w, p,
				func(v lb.View) ([]lb.Entry, error) { return tw.s.Friends(ctx, v, pl, fr, opts...) }, listCmp)
		}
	}
	// Ranks of distinct ids (a repeated id: the unsharded board lists it each time, a sharded one once; only
	// the live rank watches call Ranks, with distinct ids).
	all := slices.Compact(slices.Sorted(slices.Values(players)))
	twinRead(tw, "Ranks(all) "+vs, w, p,
		func(v lb.View) (*lb.Page, error) { return tw.s.Ranks(ctx, v, all) }, pageCmp)
	// RankForScore at each score present and next to it.
	top := twinRead(tw, "Top "+vs, w, p, func(v lb.View) (*lb.Page, error) { return tw.s.Top(ctx, v, 0, lb.MaxFirst) },
		pageCmp)
	var scores []float64
	for _, e := range top.Entries {
		if !slices.Contains(scores, e.Score) {
			scores = append(scores, e.Score, math.Nextafter(e.Score, math.Inf(1)))
		}
	}
	scores = append(scores, 0, math.Copysign(0, -1), 1, -1)
	for _, sc := range scores {
		twinRead(tw, fmt.Sprintf("RankForScore(%v) %s", sc, vs), w, p,
			func(v lb.View) (*lb.RankEstimate, error) { return tw.s.RankForScore(ctx, v, sc) },
			func(got, want *lb.RankEstimate) string {
				if got.Approximate != want.Approximate || got.Size != want.Size ||
					(!want.Approximate && (got.Rank != want.Rank || got.TieRank != want.TieRank)) {
					return fmt.Sprintf("%+v, want %+v", *got, *want)
				}
				return ""
			})
	}
	// The export's rows.
	twinRead(tw, "Snapshot "+vs, w, p, func(v lb.View) ([]lb.Entry, error) {
		sn, err := tw.s.Snapshot(ctx, v)
		if err != nil {
			return nil, err
		}
		defer sn.Close(ctx)
		var out []lb.Entry
		for off := 0; ; off += 500 {
			pg, err := sn.Page(ctx, off, 500)
			if err != nil {
				return nil, err
			}
			out = append(out, pg.Entries...)
			if len(pg.Entries) < 500 {
				return out, nil
			}
		}
	}, listCmp)
}

// twinPlayers are ids of every kind: plain, unicode, hash-tag-like, 128 bytes long, and several that share a
// shard on every twin (ShardOf of each count).
func twinPlayers(n int) []string {
	ps := []string{"😀", "ü-ß", "{x}", "}{", strings.Repeat("é", lb.MaxIDBytes/2), strings.Repeat("z", lb.MaxIDBytes),
		"a b", "p\x00q"}
	for i := len(ps); i < n; i++ {
		ps = append(ps, fmt.Sprintf("p%03d", i))
	}
	return ps
}

func twinStore(t *testing.T) (*lb.Store, *testClock) {
	return shardStore(t, shardClient(t))
}

// TestShardedTwinModes: every mode and order, on every window, with heavy ties, names and metadata updates
// without score changes, removals and re-entries: the twins read as the unsharded board does.
func TestShardedTwinModes(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	for _, def := range []lb.Board{
		{ID: "best-desc", Mode: lb.Best, Order: lb.Desc},
		{ID: "best-asc", Mode: lb.Best, Order: lb.Asc},
		{ID: "latest-desc", Mode: lb.Latest, Order: lb.Desc},
		{ID: "latest-asc", Mode: lb.Latest, Order: lb.Asc},
		{ID: "sum-desc", Mode: lb.Sum, Order: lb.Desc},
		{ID: "sum-asc", Mode: lb.Sum, Order: lb.Asc},
	} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			def.Windows = []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly}
			tw := newTwins(t, s, clock, def)
			players := twinPlayers(12)
			rng := rand.New(rand.NewPCG(1, uint64(len(def.ID))))
			score := func() float64 {
				if def.Mode == lb.Sum {
					return float64(rng.IntN(7) - 3)
				}
				return float64(rng.IntN(6))
			}
			for op := range 70 {
				clock.Set(clock.Now().Add(time.Duration(rng.IntN(3)) * time.Second))
				pl := players[rng.IntN(len(players))]
				sub := lb.Submission{Player: pl, Score: score()}
				switch r := rng.IntN(20); {
				case r == 0:
					tw.remove(pl)
					continue
				case r < 3:
					sub.DisplayName = ptr(fmt.Sprintf("n%d", op))
				case r < 5:
					sub.Metadata = json.RawMessage(fmt.Sprintf(`{"op":%d}`, op))
				}
				if op == 35 {
					clock.Set(clock.Now().Add(24 * time.Hour))
				}
				if op%3 == 0 {
					tw.submitMany([]lb.Submission{sub, {Player: players[rng.IntN(len(players))], Score: score()}})
					continue
				}
				tw.submit(sub)
			}
			// A name change without a score change, and one with a score that changes nothing.
			tw.submit(lb.Submission{Player: players[0], Score: 0, DisplayName: ptr("renamed")})
			tw.submit(lb.Submission{Player: players[1], Score: 0, Metadata: json.RawMessage(`{"m":1}`)})
			now := clock.Now()
			y, wk := now.ISOWeek()
			for _, k := range []struct {
				w lb.Window
				p string
			}{{lb.AllTime, ""}, {lb.Daily, now.Add(-24 * time.Hour).Format("2006-01-02")},
				{lb.Weekly, fmt.Sprintf("%04d-W%02d", y, wk)}} {
				if k.w != lb.AllTime && def.Order == lb.Asc {
					continue // the calendar windows once per mode
				}
				tw.check(k.w, k.p, append(slices.Clone(players), "absent"))
			}
		})
	}
}

// TestShardedTwinExactTop: boards with exactTop (BEST of both orders, SUM of positive deltas: nobody leaves an
// exact tier but by being passed), tails beyond it, ties across the tier's edge. (No removals: a removal from the
// unsharded board's tier leaves a gap until a tail player climbs past the tail's best, as a drop on LATEST does,
// while the twins' wider per-shard tiers still hold the next players exactly; the twins are then exact where the
// unsharded board estimates.)
func TestShardedTwinExactTop(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	for _, def := range []lb.Board{
		{ID: "x-best", Mode: lb.Best, Order: lb.Desc, ExactTop: 4},
		{ID: "x-best-asc", Mode: lb.Best, Order: lb.Asc, ExactTop: 3},
		{ID: "x-sum", Mode: lb.Sum, Order: lb.Desc, ExactTop: 1},
	} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			tw := newTwins(t, s, clock, def)
			players := twinPlayers(12)
			rng := rand.New(rand.NewPCG(2, uint64(def.ExactTop)))
			for op := range 120 {
				clock.Set(clock.Now().Add(time.Second))
				pl := players[rng.IntN(len(players))]
				sc := float64(rng.IntN(5))
				sub := lb.Submission{Player: pl, Score: sc}
				if op%7 == 0 {
					sub.DisplayName = ptr(fmt.Sprintf("n%d", op))
				}
				tw.submit(sub)
			}
			tw.check(lb.AllTime, "", append(slices.Clone(players), "absent"))
		})
	}
}

// TestShardedTwinScoreLimits: scores at the bounds (±2^53), -0 and 0, the smallest subnormals, fractions that
// differ in the last bit, on BEST and SUM boards of both orders.
func TestShardedTwinScoreLimits(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	negZero := math.Copysign(0, -1)
	edge := []float64{lb.MaxScore, -lb.MaxScore, 0, negZero, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		1e-300, 0.1, math.Nextafter(0.1, 1), 0.30000000000000004, lb.MaxScore - 1, -lb.MaxScore + 1, 2.5e-308}
	for _, def := range []lb.Board{
		{ID: "l-best-desc", Mode: lb.Best, Order: lb.Desc},
		{ID: "l-best-asc", Mode: lb.Best, Order: lb.Asc},
		{ID: "l-latest", Mode: lb.Latest, Order: lb.Desc},
		{ID: "l-sum", Mode: lb.Sum, Order: lb.Desc},
		{ID: "l-x", Mode: lb.Best, Order: lb.Desc, ExactTop: 3},
	} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			tw := newTwins(t, s, clock, def)
			players := twinPlayers(len(edge) + 4)
			for i, sc := range edge {
				clock.Set(clock.Now().Add(time.Second))
				tw.submit(lb.Submission{Player: players[i], Score: sc})
			}
			// Ties at the bounds and at -0/0 by later players; sums that would cross the bound (refused).
			for i, sc := range []float64{lb.MaxScore, negZero, 0, -lb.MaxScore} {
				tw.submit(lb.Submission{Player: players[len(edge)+i], Score: sc})
			}
			tw.submit(lb.Submission{Player: players[0], Score: 1})
			tw.submit(lb.Submission{Player: players[1], Score: -1})
			tw.submit(lb.Submission{Player: players[2], Score: negZero})
			tw.submit(lb.Submission{Player: players[3], Score: 0})
			tw.submit(lb.Submission{Player: players[3], Score: math.NaN()})
			tw.submit(lb.Submission{Player: players[3], Score: math.Inf(1)})
			tw.submit(lb.Submission{Player: players[3], Score: lb.MaxScore + 2})
			tw.check(lb.AllTime, "", append(slices.Clone(players), "absent"))
		})
	}
}

// TestShardedTwinEventIDs: retries with the same eventId (same payload, another score, another name) are
// duplicates that return the first result and change nothing, as on the unsharded board.
func TestShardedTwinEventIDs(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	for _, def := range []lb.Board{{ID: "e-best", Mode: lb.Best}, {ID: "e-sum", Mode: lb.Sum, Order: lb.Asc}} {
		t.Run(def.ID, func(t *testing.T) {
			t.Parallel()
			s, clock := twinStore(t)
			tw := newTwins(t, s, clock, def)
			players := twinPlayers(10)
			for i, pl := range players {
				clock.Set(clock.Now().Add(time.Second))
				tw.submit(lb.Submission{Player: pl, Score: float64(i % 3), EventID: "first-" + pl})
			}
			for i, pl := range players {
				clock.Set(clock.Now().Add(time.Second))
				tw.submit(lb.Submission{Player: pl, Score: float64(i % 3), EventID: "first-" + pl})
				tw.submit(lb.Submission{Player: pl, Score: 7, EventID: "first-" + pl, DisplayName: ptr("x")})
				tw.submit(lb.Submission{Player: pl, Score: 5, EventID: "second-" + pl, Metadata: json.RawMessage(`{"a":1}`)})
				tw.submitMany([]lb.Submission{{Player: pl, Score: 5, EventID: "second-" + pl},
					{Player: pl, Score: 6, EventID: "third-" + pl}, {Player: pl, Score: 9, EventID: "third-" + pl}})
			}
			tw.remove(players[0])
			tw.submit(lb.Submission{Player: players[0], Score: 1, EventID: "first-" + players[0]})
			tw.submit(lb.Submission{Player: players[0], Score: 2, EventID: "after-removal"})
			tw.check(lb.AllTime, "", append(slices.Clone(players), "absent"))
		})
	}
}

// seasons starts or ends a season on every twin, the same change each.
func (tw *twins) season(start string, endsAt time.Time) {
	tw.t.Helper()
	ctx := context.Background()
	var want *lb.SeasonChange
	for i, id := range tw.ids {
		var got *lb.SeasonChange
		var err error
		if start != "" {
			got, err = tw.s.StartSeason(ctx, id, start, endsAt)
		} else {
			got, err = tw.s.EndSeason(ctx, id)
		}
		if err != nil {
			tw.t.Fatalf("season %q on %d shards: %v", start, tw.shards[i], err)
		}
		if i == 0 {
			want = got
		} else if got.Changed != want.Changed || got.Season != want.Season || (got.Closed == nil) != (want.Closed == nil) {
			tw.t.Fatalf("season %q on %d shards: %+v, unsharded %+v", start, tw.shards[i], got, want)
		}
	}
}

// TestShardedTwinWindows: calendar windows over day, week and month ends of an injected clock, late scores
// (achievedAt) inside and outside the grace, and seasons started and ended between submissions, on a board in a
// time zone other than UTC; every period read by its key.
func TestShardedTwinWindows(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	s, clock := twinStore(t)
	// Sunday 2031-08-31 22:00 in Tokyo: a day, an ISO week and a month end two hours later.
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no tz data:", err)
	}
	start := time.Date(2031, 8, 31, 22, 0, 0, 0, tokyo)
	clock.Set(start)
	def := lb.Board{ID: "w", Mode: lb.Best, Order: lb.Desc, TimeZone: "Asia/Tokyo", Grace: 10 * time.Minute,
		Windows: []lb.Window{lb.Daily, lb.AllTime, lb.Weekly, lb.Monthly, lb.Season}}
	tw := newTwins(t, s, clock, def)
	players := twinPlayers(10)
	rng := rand.New(rand.NewPCG(3, 3))
	tw.season("s1", start.Add(150*time.Minute))
	for op := range 120 {
		clock.Set(clock.Now().Add(time.Duration(rng.IntN(150)) * time.Second))
		sub := lb.Submission{Player: players[rng.IntN(len(players))], Score: float64(rng.IntN(5))}
		if rng.IntN(4) == 0 {
			sub.AchievedAt = clock.Now().Add(-time.Duration(rng.IntN(15)) * time.Minute)
		}
		switch op {
		case 40:
			tw.season("", time.Time{})
		case 60:
			tw.season("s2", clock.Now().Add(48*time.Hour))
		case 90:
			tw.remove(players[0])
		}
		tw.submit(sub)
	}
	day1, day2 := "2031-08-31", "2031-09-01"
	for _, k := range []struct {
		w lb.Window
		p string
	}{{lb.Daily, day1}, {lb.Daily, day2}, {lb.Weekly, "2031-W36"}, {lb.Monthly, "2031-08"}, {lb.Season, "s1"},
		{lb.Season, "s2"}} {
		tw.check(k.w, k.p, append(slices.Clone(players), "absent"))
	}
}

// TestShardedTwinRecreate: a board deleted and created again with another shard count (sharded to unsharded and
// back, and S to S') reads as a fresh board of its new definition: nothing of the old shards shows.
func TestShardedTwinRecreate(t *testing.T) {
	t.Parallel()
	skipTwinsUnderRace(t)
	ctx := context.Background()
	s, clock := twinStore(t)
	def := lb.Board{ID: "re", Mode: lb.Sum}
	tw := newTwins(t, s, clock, def)
	players := twinPlayers(12)
	for i, pl := range players {
		tw.submit(lb.Submission{Player: pl, Score: float64(i % 4), EventID: "e-" + pl, DisplayName: ptr("old")})
	}
	// Rotate the shard counts: each board id is deleted and created with the next one's count.
	next := append(slices.Clone(tw.shards[1:]), tw.shards[0])
	for i, id := range tw.ids {
		if ok, err := s.DeleteBoard(ctx, id); err != nil || !ok {
			t.Fatalf("DeleteBoard(%s): %v, %v", id, ok, err)
		}
		d := def
		d.ID, d.Shards = id, next[i]
		mustBoard(t, s, d)
	}
	// Board ids are now tw.ids with shard counts next; the unsharded one is the last id.
	last := len(tw.ids) - 1
	tw.ids = append([]string{tw.ids[last]}, tw.ids[:last]...)
	tw.shards = append([]int{next[last]}, next[:last]...)
	for i, pl := range players {
		clock.Set(clock.Now().Add(time.Second))
		// The old eventIds are new on the new board.
		tw.submit(lb.Submission{Player: pl, Score: float64(-i % 3), EventID: "e-" + pl})
		if i%3 == 0 {
			tw.submit(lb.Submission{Player: pl, Score: 1, EventID: "f-" + pl})
		}
	}
	tw.check(lb.AllTime, "", append(slices.Clone(players), "absent"))
}
