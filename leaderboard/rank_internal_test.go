package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// Rank and aroundMe reads that wait in the batcher together, on one board with the same parts asked for (and
// radius), go to Redis as one script call of their players; every caller gets what a read of its own gives. The
// oracles are other scripts: Ranks of the same player (ranks.lua) for a rank, and for an aroundMe the window of a
// whole Top list (top.lua) around the player, filled in at the edges, less the parts not asked for. Players
// without a score, a player asked six times, reads of another board and reads that ask for other parts are among
// them; those of another board or parts are not merged with the rest.
func TestMergedRankReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client(t).(*redis.Client)
	ranks, arounds := &scriptCalls{sc: rankScript}, &scriptCalls{sc: aroundScript}
	rdb.AddHook(ranks)
	rdb.AddHook(arounds)
	s := New(rdb, Config{Prefix: "rankmerge"})
	const players = 40
	for _, id := range []string{"a", "b"} {
		if _, err := s.CreateBoard(ctx, Board{ID: id}); err != nil {
			t.Fatal(err)
		}
		var subs []Submission
		for i := range players {
			sub := Submission{Board: id, Player: fmt.Sprint("p", i), Score: float64(i / 3)} // ties of three
			if i%4 == 0 {
				name := fmt.Sprint("<name ", i, ">")
				sub.DisplayName, sub.Metadata = &name, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
			}
			subs = append(subs, sub)
		}
		if _, err := s.SubmitMany(ctx, subs, Only(AllFields)); err != nil {
			t.Fatal(err)
		}
	}
	type read struct {
		board, player string
		fields        Fields
		radius        int // 0: a rank read
	}
	var reads []read
	for i := range 48 {
		r := read{board: "a", player: fmt.Sprint("p", (i*7)%players), fields: AllFields}
		switch {
		case i%6 == 1:
			r.player = fmt.Sprint("nobody", i) // no score
		case i%6 == 2:
			r.player = "p5" // asked several times
		case i%6 == 3:
			r.board = "b"
		case i%6 == 4:
			r.fields = FieldTieRank
		case i%12 == 5:
			r.radius = 3
		case i%12 == 11:
			r.radius, r.fields = 3, FieldMeta
			if i == 11 {
				r.player = "nobody"
			}
		}
		reads = append(reads, r)
	}
	got := make([][]Entry, len(reads))
	errs := make([]error, len(reads))
	ranks.take()
	arounds.take()
	queued(t, s, len(reads), func(i int) {
		r := reads[i]
		if r.radius == 0 {
			var e *Entry
			e, errs[i] = s.Rank(ctx, View{Board: r.board}, r.player, Only(r.fields))
			if e != nil {
				got[i] = []Entry{*e}
			}
			return
		}
		got[i], errs[i] = s.Around(ctx, View{Board: r.board}, r.player, r.radius, Only(r.fields))
	})
	for i, r := range reads {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		var want []Entry
		if r.radius == 0 {
			p, err := s.Ranks(ctx, View{Board: r.board}, []string{r.player}, Only(r.fields))
			if err != nil {
				t.Fatal(err)
			}
			want = p.Entries
		} else {
			top, err := s.Top(ctx, View{Board: r.board}, 0, players)
			if err != nil || len(top.Entries) != players {
				t.Fatal(top, err)
			}
			for k, e := range top.Entries {
				if e.PlayerID != r.player {
					continue
				}
				start := max(0, k-r.radius)
				stop := min(players-1, start+2*r.radius)
				start = max(0, stop-2*r.radius)
				for _, w := range top.Entries[start : stop+1] {
					if r.fields&FieldTieRank == 0 {
						w.TieRank = 0
					}
					if r.fields&FieldUpdatedAt == 0 {
						w.UpdatedAt = time.Time{}
					}
					if r.fields&FieldMeta == 0 {
						w.DisplayName, w.Metadata = nil, nil
					}
					want = append(want, w)
				}
			}
		}
		if len(got[i]) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("read %d %+v: %+v, the oracle has %+v", i, r, got[i], want)
		}
		if !strings.HasPrefix(r.player, "p") {
			t.Fatalf("read %d %+v: entries %+v", i, r, want)
		}
	}
	// Rank reads in three groups: board a with every part (24 reads), board b (8), board a with tie ranks only
	// (8); aroundMe reads in two: every part (4), metadata only (4).
	if items := ranks.take(); !reflect.DeepEqual(items, []int{24, 8, 8}) {
		t.Fatalf("rank calls with %v players, want [24 8 8]", items)
	}
	if items := arounds.take(); !reflect.DeepEqual(items, []int{4, 4}) {
		t.Fatalf("around calls with %v players, want [4 4]", items)
	}
}
