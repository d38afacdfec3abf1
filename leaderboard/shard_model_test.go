package leaderboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// The model the sharded boards are held to (issue 46): a board's window periods in plain Go, written without the
// package's code. Equal scores rank by first arrival; an arrival is every change of a player's score in a window
// period, numbered in the order the model applies the submissions (one goroutine: call order; the items of one
// SubmitMany call: input order), which is the order the contract promises across shards.

// mKey is a window period of the model.
type mKey struct {
	w lb.Window
	p string
}

// mEntry is a player's standing in a window period.
type mEntry struct {
	score   float64
	arrival int64
	updated int64 // unix s
}

// mName is a player's display data (one per board, as the names hash).
type mName struct {
	name *string
	meta json.RawMessage
}

type shardModel struct {
	board    string
	order    lb.Order
	mode     lb.Mode
	windows  []lb.Window
	arrivals int64
	periods  map[mKey]map[string]*mEntry
	names    map[string]mName
}

func newShardModel(b lb.Board) *shardModel {
	order, mode, windows := b.Order, b.Mode, b.Windows
	if order == "" {
		order = lb.Desc
	}
	if mode == "" {
		mode = lb.Best
	}
	if len(windows) == 0 {
		windows = []lb.Window{lb.AllTime}
	}
	return &shardModel{board: b.ID, order: order, mode: mode, windows: windows,
		periods: map[mKey]map[string]*mEntry{}, names: map[string]mName{}}
}

// modelPeriods are the window periods (UTC boards) a score achieved at t goes to, computed with the standard
// library only: days, ISO weeks, months.
func modelPeriods(windows []lb.Window, t time.Time) []mKey {
	t = t.UTC()
	out := make([]mKey, 0, len(windows))
	for _, w := range windows {
		var p string
		switch w {
		case lb.AllTime:
			p = "all"
		case lb.Daily:
			p = t.Format("2006-01-02")
		case lb.Weekly:
			y, wk := t.ISOWeek()
			p = fmt.Sprintf("%04d-W%02d", y, wk)
		case lb.Monthly:
			p = t.Format("2006-01")
		default:
			panic("model: window " + string(w))
		}
		out = append(out, mKey{w, p})
	}
	return out
}

// better reports whether score a ranks before score b.
func (m *shardModel) better(a, b float64) bool {
	if m.order == lb.Asc {
		return a < b
	}
	return a > b
}

// mOutcome is what a submission did to the board's first window (what Result reports).
type mOutcome struct {
	key     mKey
	prev    *mEntry // nil: no score before
	cur     mEntry
	changed bool
}

// submit applies a submission achieved at t (the store's clock) to every window.
func (m *shardModel) submit(sub lb.Submission, t time.Time) mOutcome {
	var out mOutcome
	for i, k := range modelPeriods(m.windows, t) {
		per := m.periods[k]
		if per == nil {
			per = map[string]*mEntry{}
			m.periods[k] = per
		}
		old := per[sub.Player]
		nx := sub.Score
		if old != nil {
			switch m.mode {
			case lb.Best:
				if !m.better(nx, old.score) {
					nx = old.score
				}
			case lb.Sum:
				nx = old.score + sub.Score
			}
		}
		changed := old == nil || nx != old.score
		var prev *mEntry
		if old != nil {
			c := *old
			prev = &c
		}
		if changed {
			m.arrivals++
			per[sub.Player] = &mEntry{score: nx, arrival: m.arrivals, updated: t.Unix()}
		}
		if i == 0 {
			out = mOutcome{key: k, prev: prev, cur: *per[sub.Player], changed: changed}
		}
	}
	if sub.DisplayName != nil || sub.Metadata != nil {
		n := m.names[sub.Player]
		if sub.DisplayName != nil {
			n.name = ptr(*sub.DisplayName)
		}
		if sub.Metadata != nil {
			n.meta = slices.Clone(sub.Metadata)
		}
		m.names[sub.Player] = n
	}
	return out
}

// remove takes a player out of every window period it has a score in (RemovePlayer: every period whose keys
// still exist and that is not closed; the tests' periods are all retained, none is fenced) and drops its display
// data; it reports whether the player had a score anywhere.
func (m *shardModel) remove(player string) bool {
	found := false
	for _, per := range m.periods {
		if _, ok := per[player]; ok {
			found = true
			delete(per, player)
		}
	}
	delete(m.names, player)
	return found
}

// mRow is a ranked player of a window period.
type mRow struct {
	id      string
	e       *mEntry
	rank    int64
	tieRank int64
}

// ranking returns the window period sorted: better score first, then earlier arrival; with ranks and tie ranks.
func (m *shardModel) ranking(k mKey) ([]mRow, map[string]int) {
	per := m.periods[k]
	rows := make([]mRow, 0, len(per))
	for id, e := range per {
		rows = append(rows, mRow{id: id, e: e})
	}
	slices.SortFunc(rows, func(a, b mRow) int {
		if a.e.score != b.e.score {
			if m.better(a.e.score, b.e.score) {
				return -1
			}
			return 1
		}
		return int(a.e.arrival - b.e.arrival)
	})
	pos := make(map[string]int, len(rows))
	var tie int64
	for i := range rows {
		rows[i].rank = int64(i + 1)
		if i == 0 || rows[i].e.score != rows[i-1].e.score {
			tie = int64(i + 1)
		}
		rows[i].tieRank = tie
		pos[rows[i].id] = i
	}
	return rows, pos
}

// rankOf counts the rank of a player in a window period without sorting (for checks during the writes).
func (m *shardModel) rankOf(k mKey, player string) (rank, tieRank, size int64) {
	per := m.periods[k]
	me := per[player]
	rank, tieRank = 1, 1
	for id, e := range per {
		if id == player {
			continue
		}
		if m.better(e.score, me.score) {
			rank++
			tieRank++
		} else if e.score == me.score && e.arrival < me.arrival {
			rank++
		}
	}
	return rank, tieRank, int64(len(per))
}

// entry is the Entry a read with fields f gives for row r of a window period of size n.
func (m *shardModel) entry(r mRow, n int, f lb.Fields) lb.Entry {
	e := lb.Entry{PlayerID: r.id, Rank: r.rank, Score: r.e.score, TopPercent: 100 * float64(r.rank) / float64(n)}
	if f&lb.FieldTieRank != 0 {
		e.TieRank = r.tieRank
	}
	if f&lb.FieldUpdatedAt != 0 {
		e.UpdatedAt = time.Unix(r.e.updated, 0).UTC()
	}
	if f&lb.FieldMeta != 0 {
		nm := m.names[r.id]
		e.DisplayName, e.Metadata = nm.name, nm.meta
	}
	return e
}

// entryDiff describes how got differs from want ("" when it does not).
func entryDiff(got, want lb.Entry) string {
	var d []string
	if got.PlayerID != want.PlayerID {
		d = append(d, fmt.Sprintf("playerId %q, want %q", got.PlayerID, want.PlayerID))
	}
	if got.Rank != want.Rank {
		d = append(d, fmt.Sprintf("rank %d, want %d", got.Rank, want.Rank))
	}
	if got.TieRank != want.TieRank {
		d = append(d, fmt.Sprintf("tieRank %d, want %d", got.TieRank, want.TieRank))
	}
	if got.Score != want.Score {
		d = append(d, fmt.Sprintf("score %v, want %v", got.Score, want.Score))
	}
	if got.Approximate {
		d = append(d, "approximate, want exact")
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		d = append(d, fmt.Sprintf("updatedAt %v, want %v", got.UpdatedAt, want.UpdatedAt))
	}
	if (got.DisplayName == nil) != (want.DisplayName == nil) ||
		(got.DisplayName != nil && *got.DisplayName != *want.DisplayName) {
		d = append(d, fmt.Sprintf("displayName %v, want %v", strp(got.DisplayName), strp(want.DisplayName)))
	}
	if !bytes.Equal(got.Metadata, want.Metadata) {
		d = append(d, fmt.Sprintf("metadata %s, want %s", got.Metadata, want.Metadata))
	}
	if math.Abs(got.TopPercent-want.TopPercent) > 1e-9 {
		d = append(d, fmt.Sprintf("topPercent %v, want %v", got.TopPercent, want.TopPercent))
	}
	return strings.Join(d, "; ")
}

func strp(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return strconv.Quote(*s)
}

// entriesDiff compares lists of entries ("" when equal).
func entriesDiff(got, want []lb.Entry) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries %v, want %d %v", len(got), entryIDs(got), len(want), entryIDs(want))
	}
	for i := range got {
		if d := entryDiff(got[i], want[i]); d != "" {
			return fmt.Sprintf("entry %d (%s): %s", i, want[i].PlayerID, d)
		}
	}
	return ""
}

func entryIDs(es []lb.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s@%d", e.PlayerID, e.Rank)
	}
	return out
}

// sameShards reports whether a board's Shards says what want says: 0 and 1 both mean unsharded.
func sameShards(got, want int) bool {
	if want <= 1 {
		return got == 0 || got == 1
	}
	return got == want
}

// shardClient is the Redis the sharded-board tests run on: the shared 3-primary cluster (the shared standalone
// server with REDISTEST_NO_CLUSTER=1).
func shardClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	if v, _ := strconv.ParseBool(os.Getenv(redistest.NoClusterEnv)); v {
		return redistest.SharedStandalone(t).Client(t)
	}
	return redistest.SharedCluster(t).Client(t)
}

// shardKeys returns the keys under a key base on every master (or the one server).
func shardKeys(t *testing.T, rdb redis.UniversalClient, base string) []string {
	t.Helper()
	pattern := strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(base) + "*"
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("unexpected client type %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// modelScale is the number of submissions TestShardedBoardMatchesModel makes per shard count (split over its
// three boards): LB_MODEL_SUBMISSIONS, else 100,000 (6,000 with -short). make test runs it at 12,000 (about 15 s on
// 2 cores; 100,000 take two minutes of its budget).
func modelScale() int {
	if n, err := strconv.Atoi(os.Getenv("LB_MODEL_SUBMISSIONS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 6_000
	}
	return 100_000
}

// TestShardedBoardMatchesModel: for S = 1, 3, 7 and 16 shards, three boards (BEST DESC, SUM DESC, LATEST ASC;
// windows ALL_TIME, DAILY, WEEKLY, MONTHLY) take their share of modelScale submissions over two days of an
// injected clock, with heavy ties (scores from a small range), through SubmitMany batches of 1 to 1000 and single
// Submits, some with display names and metadata, and some RemovePlayer calls; every result is held to the model (a
// Submit's in full; a SubmitMany item's score, updated flag, previous score, window and period, its ranks being
// TestShardedSubmitManyResults' business; RemovePlayer's answer).
// Then, quiet, every read of every window period (and of the first day's DAILY period) is compared with it: Top
// pages (every field), Ranks of every player and absent ones, Rank, Around at the edges with radius 0 to 5,
// Friends over mixed shards with absent friends, Size; and every player's ranking key is under the key base of
// its shard (ShardOf, ShardKeyBase).
func TestShardedBoardMatchesModel(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t) // one goroutine's submissions and reads per board
	rdb := shardClient(t)
	total := modelScale()
	for _, shards := range []int{1, 3, 7, 16} {
		t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
			t.Parallel()
			for i, def := range []lb.Board{
				{ID: "best", Mode: lb.Best, Order: lb.Desc},
				{ID: "sum", Mode: lb.Sum, Order: lb.Desc},
				{ID: "latest {x}:😀", Mode: lb.Latest, Order: lb.Asc},
			} {
				t.Run(string(def.Mode), func(t *testing.T) {
					def.Shards = shards
					def.Windows = []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly}
					runShardModel(t, rdb, def, total/3, uint64(shards*10+i))
				})
			}
		})
	}
}

// modelPlayers is the player pool of a model run: plain ids and some that look like hash tags or are not ASCII.
func modelPlayers(n int) []string {
	players := []string{"{", "}", "{}", "a{b}c", "{tag}", ":", "😀", "ü", " ", "p\x00q"}
	for i := len(players); i < n; i++ {
		players = append(players, fmt.Sprintf("p%05d", i))
	}
	return players
}

func runShardModel(t *testing.T, rdb redis.UniversalClient, def lb.Board, subs int, seed uint64) {
	ctx := context.Background()
	start := time.Date(2031, 3, 11, 10, 0, 0, 0, time.UTC) // a Tuesday; the next day is in the same week and month
	clock := &testClock{t: start}
	s := lb.New(rdb, lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
	b := mustBoard(t, s, def)
	if !sameShards(b.Shards, def.Shards) {
		t.Fatalf("CreateBoard returned Shards %d, want %d", b.Shards, def.Shards)
	}
	if got, err := lb.New(rdb, lb.Config{Prefix: s.Prefix()}).Board(ctx, def.ID); err != nil || !sameShards(got.Shards, def.Shards) {
		t.Fatalf("Board read back by another store: %+v, %v; want Shards %d", got, err, def.Shards)
	}
	m := newShardModel(def)
	rng := rand.New(rand.NewPCG(seed, 46))
	players := modelPlayers(max(300, subs/10))
	if def.Shards > 1 {
		on := make([]int, def.Shards)
		for _, p := range players {
			sh := lb.ShardOf(p, def.Shards)
			if sh < 0 || sh >= def.Shards {
				t.Fatalf("ShardOf(%q, %d) = %d", p, def.Shards, sh)
			}
			on[sh]++
		}
		if slices.Contains(on, 0) {
			t.Fatalf("players per shard %v: some shard gets none of %d players", on, len(players))
		}
	}
	score := func() float64 {
		switch def.Mode {
		case lb.Sum:
			return float64(rng.IntN(7) - 2) // deltas, 0 included
		default:
			return float64(rng.IntN(40))
		}
	}
	newSub := func() lb.Submission {
		sub := lb.Submission{Board: def.ID, Player: players[rng.IntN(len(players))], Score: score()}
		if rng.IntN(10) == 0 {
			sub.DisplayName = ptr(fmt.Sprintf("name %d ✓", rng.IntN(1000)))
		}
		if rng.IntN(20) == 0 {
			sub.Metadata = json.RawMessage(fmt.Sprintf(`{"k":%d,"s":"v{%d}"}`, rng.IntN(100), rng.IntN(9)))
		}
		return sub
	}
	// checkResult holds a result to the model's outcome; ranks only when full (single calls on a quiet board).
	checkResult := func(what string, r *lb.Result, o mOutcome, full bool) {
		t.Helper()
		var d []string
		if r.Duplicate || r.Updated != o.changed || r.Entry.Score != o.cur.score || r.Entry.PlayerID == "" ||
			!r.Entry.UpdatedAt.Equal(time.Unix(o.cur.updated, 0).UTC()) || r.Window != o.key.w || r.Period != o.key.p {
			d = append(d, fmt.Sprintf("duplicate %v updated %v score %v updatedAt %v window %s period %s; want false %v %v %v %s %s",
				r.Duplicate, r.Updated, r.Entry.Score, r.Entry.UpdatedAt, r.Window, r.Period,
				o.changed, o.cur.score, time.Unix(o.cur.updated, 0).UTC(), o.key.w, o.key.p))
		}
		if (r.PreviousScore == nil) != (o.prev == nil) || (o.prev != nil && *r.PreviousScore != o.prev.score) {
			d = append(d, fmt.Sprintf("previousScore %v, want %+v", r.PreviousScore, o.prev))
		}
		if full {
			rank, tie, size := m.rankOf(o.key, r.Entry.PlayerID)
			nm := m.names[r.Entry.PlayerID]
			want := lb.Entry{PlayerID: r.Entry.PlayerID, Rank: rank, TieRank: tie, Score: o.cur.score,
				UpdatedAt: time.Unix(o.cur.updated, 0).UTC(), DisplayName: nm.name, Metadata: nm.meta,
				TopPercent: 100 * float64(rank) / float64(size)}
			if e := entryDiff(r.Entry, want); e != "" {
				d = append(d, e)
			}
			if r.Size != size {
				d = append(d, fmt.Sprintf("size %d, want %d", r.Size, size))
			}
		}
		if len(d) > 0 {
			t.Fatalf("%s: %s", what, strings.Join(d, "; "))
		}
	}

	prevRankOf := func(k mKey, player string) *int64 {
		if _, ok := m.periods[k][player]; !ok {
			return nil
		}
		r, _, _ := m.rankOf(k, player)
		return &r
	}
	done := 0
	day2 := false
	for op := 0; done < subs; op++ {
		if !day2 && done >= subs/2 {
			day2 = true
			clock.Set(start.Add(24 * time.Hour))
		}
		clock.Set(clock.Now().Add(time.Second))
		now := clock.Now()
		switch r := rng.IntN(100); {
		case r < 3: // a single Submit, checked in full
			sub := newSub()
			first := modelPeriods(m.windows, now)[0]
			prevRank := prevRankOf(first, sub.Player)
			got, err := s.Submit(ctx, sub)
			if err != nil {
				t.Fatalf("Submit %+v: %v", sub, err)
			}
			o := m.submit(sub, now)
			checkResult(fmt.Sprintf("op %d: Submit(%q, %v)", op, sub.Player, sub.Score), got, o, true)
			if (got.PreviousRank == nil) != (prevRank == nil) || (prevRank != nil && *got.PreviousRank != *prevRank) {
				t.Fatalf("op %d: Submit(%q): previousRank %v, want %v", op, sub.Player, got.PreviousRank, prevRank)
			}
			done++
		case r < 4: // a removal
			p := players[rng.IntN(len(players))]
			got, err := s.RemovePlayer(ctx, def.ID, p)
			if err != nil {
				t.Fatalf("RemovePlayer(%q): %v", p, err)
			}
			if want := m.remove(p); got != want {
				t.Fatalf("op %d: RemovePlayer(%q) = %v, want %v", op, p, got, want)
			}
		default:
			n := 1 + rng.IntN(400)
			if rng.IntN(10) == 0 {
				n = lb.MaxBulk
			}
			n = min(n, subs-done)
			batch := make([]lb.Submission, n)
			for i := range batch {
				batch[i] = newSub()
			}
			outs, err := s.SubmitMany(ctx, batch)
			if err != nil {
				t.Fatalf("SubmitMany of %d: %v", n, err)
			}
			for i, sub := range batch {
				if outs[i].Err != nil {
					t.Fatalf("op %d item %d %+v: %v", op, i, sub, outs[i].Err)
				}
				checkResult(fmt.Sprintf("op %d: SubmitMany item %d (%q, %v)", op, i, sub.Player, sub.Score),
					outs[i].Result, m.submit(sub, now), false)
			}
			done += n
		}
	}

	views := modelPeriods(m.windows, clock.Now())
	views = append(views, modelPeriods([]lb.Window{lb.Daily}, start)[0]) // the first day, a past period now
	// Read through a store of its own (another process), so that nothing of the writer's state answers.
	reader := lb.New(rdb, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
	for _, k := range views {
		t.Run(fmt.Sprintf("%s %s", k.w, k.p), func(t *testing.T) {
			checkModelView(t, reader, m, def.Shards, k, rng)
		})
	}
	if def.Shards > 1 {
		checkShardPlacement(t, rdb, s.Prefix(), m, def.Shards)
	}
}

// checkModelView compares every read of window period k with the model.
func checkModelView(t *testing.T, s *lb.Store, m *shardModel, shards int, k mKey, rng *rand.Rand) {
	ctx := context.Background()
	v := lb.View{Board: m.board, Window: k.w, Period: k.p}
	rows, pos := m.ranking(k)
	n := len(rows)
	if n < 20 {
		t.Fatalf("the model has %d players in %s %s: too few to test anything", n, k.w, k.p)
	}
	all := lb.AllFields
	want := func(i int, f lb.Fields) lb.Entry { return m.entry(rows[i], n, f) }

	if got, err := s.Size(ctx, v); err != nil || got != int64(n) {
		t.Fatalf("Size = %d, %v; want %d", got, err, n)
	}

	// Top: every rank page by page as deep as a sharded board lists, then odd pages.
	depth := n
	if shards > 1 {
		depth = min(n, lb.MaxShardedDepth)
	}
	top := func(off, first int) {
		t.Helper()
		p, err := s.Top(ctx, v, off, first)
		if err != nil {
			t.Fatalf("Top(%d, %d): %v", off, first, err)
		}
		if p.Size != int64(n) || p.Board != m.board || p.Window != k.w || p.Period != k.p || p.Order != m.order {
			t.Fatalf("Top(%d, %d): page %s %s %s %s size %d; want %s %s %s %s size %d", off, first, p.Board,
				p.Window, p.Period, p.Order, p.Size, m.board, k.w, k.p, m.order, n)
		}
		var exp []lb.Entry
		for i := off; i < min(off+first, n); i++ {
			exp = append(exp, want(i, all))
		}
		if d := entriesDiff(p.Entries, exp); d != "" {
			t.Fatalf("Top(%d, %d): %s", off, first, d)
		}
	}
	for off := 0; off < depth; off += lb.MaxFirst {
		top(off, min(lb.MaxFirst, depth-off))
	}
	for _, pg := range [][2]int{{0, 0}, {0, 1}, {1, 2}, {3, 7}, {n - 5, 10}, {n - 1, 1}, {n, 5}, {n + 17, 3}} {
		top(pg[0], pg[1])
	}

	// Ranks: every player in the given order, with absent ones mixed in, in calls of MaxFriends ids.
	ids := make([]string, 0, n+n/50)
	for i, r := range rows {
		ids = append(ids, r.id)
		if i%50 == 7 {
			ids = append(ids, fmt.Sprintf("absent-%d", i))
		}
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i := 0; i < len(ids); i += lb.MaxFriends {
		chunk := ids[i:min(i+lb.MaxFriends, len(ids))]
		p, err := s.Ranks(ctx, v, chunk)
		if err != nil {
			t.Fatalf("Ranks of %d ids: %v", len(chunk), err)
		}
		var exp []lb.Entry
		for _, id := range chunk {
			if j, ok := pos[id]; ok {
				exp = append(exp, want(j, all))
			}
		}
		if d := entriesDiff(p.Entries, exp); d != "" {
			t.Fatalf("Ranks (ids %d..%d): %s", i, i+len(chunk), d)
		}
		if p.Size != int64(n) {
			t.Fatalf("Ranks: size %d, want %d", p.Size, n)
		}
	}

	// Rank: the first and last ranks, a sample, absent players; some reads with fewer fields (the plain read).
	sample := []int{0, 1, n - 2, n - 1}
	for range 40 {
		sample = append(sample, rng.IntN(n))
	}
	for i, j := range sample {
		f := all
		var opts []lb.ReadOption
		if i%4 == 3 {
			f = lb.FieldUpdatedAt
			opts = []lb.ReadOption{lb.Only(f)}
		}
		e, err := s.Rank(ctx, v, rows[j].id, opts...)
		if err != nil || e == nil {
			t.Fatalf("Rank(%q) = %+v, %v; want rank %d", rows[j].id, e, err, j+1)
		}
		if d := entryDiff(*e, want(j, f)); d != "" {
			t.Fatalf("Rank(%q) fields %b: %s", rows[j].id, f, d)
		}
	}
	for _, id := range []string{"absent", "p99999", "{absent}"} {
		if e, err := s.Rank(ctx, v, id); err != nil || e != nil {
			t.Fatalf("Rank of absent %q = %+v, %v; want nil", id, e, err)
		}
	}

	// Around: at both edges and in the middle, radius 0 to 5 (the window is filled in at the edges).
	around := func(j, radius int, f lb.Fields, opts ...lb.ReadOption) {
		t.Helper()
		got, err := s.Around(ctx, v, rows[j].id, radius, opts...)
		if err != nil {
			t.Fatalf("Around(rank %d, %d): %v", j+1, radius, err)
		}
		R := radius
		lo := max(0, j-R)
		hi := lo + 2*R
		if hi > n-1 {
			hi = n - 1
			lo = max(0, hi-2*R)
		}
		var exp []lb.Entry
		for i := lo; i <= hi; i++ {
			exp = append(exp, want(i, f))
		}
		if d := entriesDiff(got, exp); d != "" {
			t.Fatalf("Around(%q at rank %d, radius %d, fields %b): %s", rows[j].id, j+1, radius, f, d)
		}
	}
	for _, j := range []int{0, 1, 2, 3, n / 2, n - 4, n - 3, n - 2, n - 1} {
		for radius := range 6 {
			around(j, radius, all)
		}
		around(j, 3, lb.FieldUpdatedAt|lb.FieldMeta, lb.Only(lb.FieldUpdatedAt|lb.FieldMeta))
	}
	if got, err := s.Around(ctx, v, "absent", 3); err != nil || len(got) != 0 {
		t.Fatalf("Around of an absent player = %v, %v; want none", entryIDs(got), err)
	}

	// Friends: players of every shard, absent ids, repeats; the player absent too.
	for c := range 6 {
		player := rows[rng.IntN(n)].id
		if c == 5 {
			player = "absent-me"
		}
		var friends []string
		for range 3 + rng.IntN(30) {
			friends = append(friends, rows[rng.IntN(n)].id)
		}
		friends = append(friends, "absent-1", friends[0], player, "{absent-2}")
		if c == 4 {
			friends = append(friends, rows[0].id, rows[n-1].id)
		}
		got, err := s.Friends(ctx, v, player, friends)
		if err != nil {
			t.Fatalf("Friends: %v", err)
		}
		seen := map[string]bool{}
		var js []int
		for _, id := range append([]string{player}, friends...) {
			if j, ok := pos[id]; ok && !seen[id] {
				seen[id] = true
				js = append(js, j)
			}
		}
		slices.Sort(js)
		var exp []lb.Entry
		for _, j := range js {
			exp = append(exp, want(j, all))
		}
		if d := entriesDiff(got, exp); d != "" {
			t.Fatalf("Friends(%q, %v): %s", player, friends, d)
		}
	}
}

// checkShardPlacement: the shards' key bases are distinct slots, shard 0's is KeyBase, each has the form
// "<prefix>:{<tag>}:", and the ALL_TIME ranking key under each base holds exactly the players ShardOf puts there.
func checkShardPlacement(t *testing.T, rdb redis.UniversalClient, prefix string, m *shardModel, shards int) {
	ctx := context.Background()
	perShard := make([]int64, shards)
	for id := range m.periods[mKey{lb.AllTime, "all"}] {
		perShard[lb.ShardOf(id, shards)]++
	}
	slots := map[int]int{}
	for i := range shards {
		base := lb.ShardKeyBase(prefix, m.board, i, shards)
		if i == 0 && base != lb.KeyBase(prefix, m.board) {
			t.Fatalf("ShardKeyBase(shard 0) = %q, want KeyBase %q", base, lb.KeyBase(prefix, m.board))
		}
		if !strings.HasPrefix(base, prefix+":{") || !strings.HasSuffix(base, "}:") ||
			strings.Count(base, "{") != 1 || strings.Count(base, "}") != 1 {
			t.Fatalf("ShardKeyBase(%d of %d) = %q, want %q", i, shards, base, prefix+":{<tag>}:")
		}
		slot := lb.HashSlot(base)
		if j, ok := slots[slot]; ok {
			t.Fatalf("shards %d and %d of %d share slot %d", j, i, shards, slot)
		}
		slots[slot] = i
		var ranking string
		for _, k := range shardKeys(t, rdb, base) {
			if lb.IsRankingKey(k) && strings.HasSuffix(k, ":all") {
				ranking = k
			}
		}
		if ranking == "" {
			t.Fatalf("shard %d of %d: no ALL_TIME ranking key under %q (it has %d players by ShardOf)", i, shards,
				base, perShard[i])
		}
		if n, err := rdb.ZCard(ctx, ranking).Result(); err != nil || n != perShard[i] {
			t.Fatalf("shard %d of %d: %s holds %d players, %v; ShardOf puts %d there", i, shards, ranking, n, err,
				perShard[i])
		}
	}
}
