package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// placements counts the commands a store sends that place entries on a sharded board's shards (placeOn's plain
// counts and shardnear.lua): its see is a redistest.Commands hook.
type placements struct {
	mu sync.Mutex
	n  int
}

func (c *placements) see(cmd redis.Cmder) {
	a := cmd.Args()
	name := strings.ToLower(fmt.Sprint(a[0]))
	if name == "zcount" || name == "zcard" || name == "zrange" ||
		strings.HasPrefix(name, "fcall") && len(a) > 1 && strings.HasSuffix(fmt.Sprint(a[1]), "_shardnear") {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

func (c *placements) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestShardedSubmissionRankWhenAsked: a submission to a sharded board is placed on the other shards when its rank
// is asked (FieldRank, FieldTieRank; FieldPreviousRank when the player had a score), has an EventID, or its player is within the first
// MaxFirst ranks of its shard before or after; then its result is the unsharded twin's (the oracle: the same
// submissions on a board of one shard). Otherwise no placement command is sent, and its rank, topPercent and size
// are 0 while its score and updated flag are the twin's; the board's order is the twin's either way.
func TestShardedSubmissionRankWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hook := &placements{}
	s, _ := seenShardStore(t, hook.see)
	sharded := mustBoard(t, s, lb.Board{ID: "ask", Shards: 3, Order: lb.Desc, Mode: lb.Best})
	twin := mustBoard(t, s, lb.Board{ID: "ask-twin", Order: lb.Desc, Mode: lb.Best})

	// 6,000 players, about 2,000 a shard, p<i> at 1000+i: the lower half ranks below MaxFirst on its shards.
	rng := rand.New(rand.NewPCG(46, 1))
	const players = 6000
	for i := 0; i < players; i += 1000 {
		var subs []lb.Submission
		for j := i; j < i+1000; j++ {
			subs = append(subs, lb.Submission{Player: fmt.Sprint("p", j), Score: float64(1000 + j)})
		}
		submitBoth(t, s, sharded.ID, twin.ID, subs, lb.Only(0))
	}

	type ask struct {
		name   string
		fields lb.Fields
		event  bool
		placed bool // always placed
	}
	asks := []ask{
		{"none", 0, false, false},
		{"meta and updatedAt", lb.FieldMeta | lb.FieldUpdatedAt, false, false},
		{"rank", lb.FieldRank, false, true},
		{"tieRank", lb.FieldTieRank, false, true},
		{"previousRank", lb.FieldPreviousRank, false, false}, // placed when there is a previous rank
		{"eventId", 0, true, true},
		{"all", lb.AllFields, false, true},
	}
	skipped, event := 0, 0
	for round := range 40 {
		a := asks[round%len(asks)]
		var subs []lb.Submission
		for j := range 25 {
			// Mostly the lower half's players, and new ones (p6000..); equal scores are frequent.
			sub := lb.Submission{Player: fmt.Sprint("p", rng.IntN(players/2)), Score: float64(1000 + rng.IntN(3000))}
			switch j % 5 {
			case 0:
				sub.Score = float64(10000 + rng.IntN(100)) // into the top
			case 1:
				sub.Player, sub.Score = fmt.Sprint("p", players+rng.IntN(200)), float64(rng.IntN(1000)) // below
			case 2:
				sub.Player = fmt.Sprint("p", rng.IntN(players))
			}
			if a.event {
				event++
				sub.EventID = fmt.Sprint("e", event)
			}
			subs = append(subs, sub)
		}
		got, want := submitBoth(t, s, sharded.ID, twin.ID, subs, lb.Only(a.fields))
		for j, g := range got {
			w := want[j]
			what := fmt.Sprintf("round %d (%s) item %d (%s %v)", round, a.name, j, subs[j].Player, subs[j].Score)
			if g.Entry.Score != w.Entry.Score || g.Updated != w.Updated || g.Duplicate != w.Duplicate ||
				g.Entry.PlayerID != w.Entry.PlayerID || !g.Entry.UpdatedAt.Equal(w.Entry.UpdatedAt) {
				t.Fatalf("%s: %+v, twin %+v", what, g, w)
			}
			if g.Entry.Rank == 0 {
				// Not placed: allowed only when not asked, and only far below the top before and after.
				prevLow := w.PreviousRank == nil || *w.PreviousRank > lb.MaxFirst
				asked := a.fields&lb.FieldPreviousRank != 0 && w.PreviousRank != nil
				if a.placed || asked || w.Entry.Rank <= lb.MaxFirst || !prevLow {
					t.Fatalf("%s: not placed; twin rank %d, previous %v", what, w.Entry.Rank, w.PreviousRank)
				}
				if g.Entry.TopPercent != 0 || g.Size != 0 || g.PreviousRank != nil || g.Entry.Approximate {
					t.Fatalf("%s: not placed, but %+v", what, g)
				}
				skipped++
				continue
			}
			if g.Entry.Rank != w.Entry.Rank || g.Size != w.Size || g.Entry.TopPercent != w.Entry.TopPercent {
				t.Fatalf("%s: rank %d size %d top %v, twin %d %d %v", what, g.Entry.Rank, g.Size, g.Entry.TopPercent,
					w.Entry.Rank, w.Size, w.Entry.TopPercent)
			}
			if a.fields&lb.FieldTieRank != 0 && g.Entry.TieRank != w.Entry.TieRank {
				t.Fatalf("%s: tieRank %d, twin %d", what, g.Entry.TieRank, w.Entry.TieRank)
			}
			if a.fields&lb.FieldPreviousRank != 0 && fmt.Sprint(rankOrNil(g.PreviousRank)) != fmt.Sprint(rankOrNil(w.PreviousRank)) {
				t.Fatalf("%s: previous rank %v, twin %v", what, rankOrNil(g.PreviousRank), rankOrNil(w.PreviousRank))
			}
		}
	}
	if skipped < 50 {
		t.Fatalf("%d submissions were not placed: the test did not reach the case", skipped)
	}

	// The cost: a submission far below the top that asks no rank sends no placement command; asked, it does.
	low := lb.Submission{Board: sharded.ID, Player: "p17", Score: 1}
	for _, f := range []lb.Fields{0, lb.FieldRank} {
		low.Score++
		before := hook.count()
		r, err := s.Submit(ctx, low, lb.Only(f))
		if err != nil {
			t.Fatal(err)
		}
		sent := hook.count() - before
		if f == 0 && (sent != 0 || r.Entry.Rank != 0) {
			t.Fatalf("rank not asked: %d placement commands, rank %d", sent, r.Entry.Rank)
		}
		if f != 0 && (sent == 0 || r.Entry.Rank <= lb.MaxFirst) {
			t.Fatalf("rank asked: %d placement commands, rank %d", sent, r.Entry.Rank)
		}
	}

	// Whatever was asked, the board is the twin's: every player's rank, read back.
	var ids []string
	for i := range players + 200 {
		ids = append(ids, fmt.Sprint("p", i))
	}
	for i := 0; i < len(ids); i += 500 {
		part := ids[i:min(i+500, len(ids))]
		g, err := s.Ranks(ctx, lb.View{Board: sharded.ID}, part)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.Ranks(ctx, lb.View{Board: twin.ID}, part)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Entries) != len(w.Entries) {
			t.Fatalf("%d entries, twin %d", len(g.Entries), len(w.Entries))
		}
		for k := range g.Entries {
			if g.Entries[k].PlayerID != w.Entries[k].PlayerID || g.Entries[k].Rank != w.Entries[k].Rank ||
				g.Entries[k].Score != w.Entries[k].Score {
				t.Fatalf("read back: %+v, twin %+v", g.Entries[k], w.Entries[k])
			}
		}
	}
}

// submitBoth sends subs to the sharded board and to its twin (as one SubmitMany call each) and returns both
// boards' results, failing on any error.
func submitBoth(t *testing.T, s *lb.Store, sharded, twin string, subs []lb.Submission, opt lb.ReadOption) (
	[]*lb.Result, []*lb.Result) {
	t.Helper()
	var out [2][]*lb.Result
	for k, board := range []string{sharded, twin} {
		in := make([]lb.Submission, len(subs))
		for i, sub := range subs {
			sub.Board = board
			in[i] = sub
		}
		outs, err := s.SubmitMany(context.Background(), in, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			if o.Err != nil {
				t.Fatalf("%s item %d: %v", board, i, o.Err)
			}
			out[k] = append(out[k], o.Result)
		}
	}
	return out[0], out[1]
}

func rankOrNil(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestShardedAroundListsRadiusElsewhere: aroundMe on a sharded board asks the other shards for radius neighbours
// on a side where the player has radius players on its own shard (the board's nearest on that side are among each
// shard's nearest), and for 2 × radius only where the window may shift, near the top or the bottom; the answer is
// the unsharded twin's either way. The probes are read from the shardnear.lua calls the store sends.
func TestShardedAroundListsRadiusElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var lists [][2]int // nb, na of every probe that lists neighbours by score (not a '?' probe) since the last reset
	s, _ := seenShardStore(t, func(cmd redis.Cmder) {
		a := cmd.Args()
		if len(a) < 4 || !strings.EqualFold(fmt.Sprint(a[0]), "fcall") || !strings.HasSuffix(fmt.Sprint(a[1]), "_shardnear") {
			return
		}
		argv := a[4:]
		mu.Lock()
		defer mu.Unlock()
		for i := 5; i+4 < len(argv); i += 5 { // ARGV: 5 header values, then probes of 5 (shardnear.lua)
			if fmt.Sprint(argv[i]) != "?" {
				var nb, na int
				fmt.Sscan(fmt.Sprint(argv[i+3]), &nb)
				fmt.Sscan(fmt.Sprint(argv[i+4]), &na)
				if nb > 0 || na > 0 { // not a tie rank's count
					lists = append(lists, [2]int{nb, na})
				}
			}
		}
	})
	sharded := mustBoard(t, s, lb.Board{ID: "around", Shards: 3})
	twin := mustBoard(t, s, lb.Board{ID: "around-twin"})
	const players, radius = 300, 4
	var subs []lb.Submission
	for i := range players {
		subs = append(subs, lb.Submission{Player: fmt.Sprint("a", i), Score: float64(i / 3)}) // ties of three
	}
	submitBoth(t, s, sharded.ID, twin.ID, subs, lb.Only(0))
	top, err := s.Top(ctx, lb.View{Board: twin.ID}, 0, players)
	if err != nil {
		t.Fatal(err)
	}
	for rank, e := range top.Entries {
		mu.Lock()
		lists = nil
		mu.Unlock()
		got, err := s.Around(ctx, lb.View{Board: sharded.ID}, e.PlayerID, radius)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Around(ctx, lb.View{Board: twin.ID}, e.PlayerID, radius)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries, twin %d", e.PlayerID, len(got), len(want))
		}
		for k := range got {
			g, w := got[k], want[k]
			if g.PlayerID != w.PlayerID || g.Rank != w.Rank || g.TieRank != w.TieRank || g.Score != w.Score ||
				!g.UpdatedAt.Equal(w.UpdatedAt) || g.TopPercent != w.TopPercent {
				t.Fatalf("%s (rank %d): entry %d %+v, twin %+v", e.PlayerID, rank+1, k, g, w)
			}
		}
		mu.Lock()
		seen := lists
		mu.Unlock()
		if len(seen) != 2 {
			t.Fatalf("%s: %d probes placed by score, want one on each other shard", e.PlayerID, len(seen))
		}
		// Where the player has radius players ahead (after) on the board, it may have fewer on its own shard: the
		// bounds are the own shard's, so only the board's far ends must be 2 × radius.
		for _, l := range seen {
			if rank < radius && l[1] != 2*radius || players-1-rank < radius && l[0] != 2*radius {
				t.Fatalf("%s (rank %d): other shards asked %d before, %d after", e.PlayerID, rank+1, l[0], l[1])
			}
			if rank >= 3*radius+3 && players-1-rank >= 3*radius+3 && (l[0] != radius || l[1] != radius) {
				t.Fatalf("%s (rank %d, middle): other shards asked %d before, %d after", e.PlayerID, rank+1, l[0], l[1])
			}
		}
	}
}
