package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// Rank reads that wait in the batcher together, on one board with the same parts asked for, go to Redis as one
// script call of their players; every caller gets what a read of its own gives. The oracle is Ranks of the same
// player (ranks.lua, a script of its own). Players without a score, a player asked twice, reads of another board
// and reads that ask for other parts are among them; those of another board or parts are not merged with the rest.
func TestMergedRankReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client(t).(*redis.Client)
	calls := &scriptCalls{sc: rankScript}
	rdb.AddHook(redistest.Commands{See: calls.see})
	s := New(rdb, Config{Prefix: "rankmerge"})
	for _, id := range []string{"a", "b"} {
		if _, err := s.CreateBoard(ctx, Board{ID: id}); err != nil {
			t.Fatal(err)
		}
		var subs []Submission
		for i := range 40 {
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
	}
	var reads []read
	for i := range 48 {
		r := read{board: "a", player: fmt.Sprint("p", (i*7)%40), fields: AllFields}
		switch {
		case i%6 == 1:
			r.player = fmt.Sprint("nobody", i) // no score
		case i%6 == 2:
			r.player = "p5" // asked several times
		case i%6 == 3:
			r.board = "b"
		case i%6 == 4:
			r.fields = FieldTieRank
		}
		reads = append(reads, r)
	}
	got := make([]*Entry, len(reads))
	errs := make([]error, len(reads))
	calls.take()
	queued(t, s, len(reads), func(i int) {
		r := reads[i]
		got[i], errs[i] = s.Rank(ctx, View{Board: r.board}, r.player, Only(r.fields))
	})
	for i, r := range reads {
		p, err := s.Ranks(ctx, View{Board: r.board}, []string{r.player}, Only(r.fields))
		if err != nil || errs[i] != nil {
			t.Fatal(err, errs[i])
		}
		var want *Entry
		if len(p.Entries) == 1 {
			want = &p.Entries[0]
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("read %d %+v: %+v, Ranks has %+v", i, r, got[i], want)
		}
		if strings.HasPrefix(r.player, "p") != (want != nil) {
			t.Fatalf("read %d %+v: entry %+v", i, r, want)
		}
	}
	// Three groups: board a with every part (32 reads), board b (8), board a with tie ranks only (8).
	if items := calls.take(); !reflect.DeepEqual(items, []int{32, 8, 8}) {
		t.Fatalf("rank calls with %v players, want [32 8 8]", items)
	}
}
