package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

func ranksOf(es []lb.Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Rank
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for r := from; r <= to; r++ {
		out = append(out, r)
	}
	return out
}

func TestReads(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "reads"})
		v := lb.View{Board: b.ID}
		for i := range 30 {
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprintf("p%02d", i), Score: float64(1000 - i)})
		}
		// Around-me is filled in at the edges: rank 2 with radius 5 gives ranks 1..11.
		for _, c := range []struct {
			player string
			radius int
			want   []int64
		}{
			{"p01", 5, seq(1, 11)}, {"p00", 0, seq(1, 1)}, {"p15", 2, seq(14, 18)}, {"p29", 3, seq(24, 30)},
			{"p28", 100, seq(1, 30)}, {"missing", 5, nil},
		} {
			got, err := s.Around(ctx, v, c.player, c.radius)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ranksOf(got), c.want) {
				t.Fatalf("around %s radius %d: ranks %v, want %v", c.player, c.radius, ranksOf(got), c.want)
			}
		}
		// Top pages.
		p, err := s.Top(ctx, v, 25, 10)
		if err != nil || !slices.Equal(ranksOf(p.Entries), seq(26, 30)) || p.Size != 30 {
			t.Fatalf("top offset 25: %v %v", p, err)
		}
		if p.Entries[0].TopPercent != 100*26.0/30 {
			t.Fatalf("topPercent %v", p.Entries[0].TopPercent)
		}
		// Friends: the player and friends with a score, in rank order; unknown and repeated ids left out.
		fr, err := s.Friends(ctx, v, "p10", []string{"p20", "nobody", "p03", "p20", "p10"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range fr {
			ids = append(ids, e.PlayerID)
		}
		if !slices.Equal(ids, []string{"p03", "p10", "p20"}) || !slices.Equal(ranksOf(fr), []int64{4, 11, 21}) {
			t.Fatalf("friends: %v %v", ids, ranksOf(fr))
		}
		if e, err := s.Rank(ctx, v, "nobody"); e != nil || err != nil {
			t.Fatalf("rank of a player without a score: %v %v", e, err)
		}
		// Display name and metadata are stored with the player and kept when a later submission omits them.
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p05", Score: 1, DisplayName: ptr("Ada 🏁"),
			Metadata: json.RawMessage(`{"car": "red", "laps": [1, 2]}`)})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p05", Score: 2000})
		e, err := s.Rank(ctx, v, "p05")
		if err != nil || e.Rank != 1 || e.DisplayName == nil || *e.DisplayName != "Ada 🏁" ||
			string(e.Metadata) != `{"car":"red","laps":[1,2]}` {
			t.Fatalf("rank with metadata: %+v %v (metadata %s)", e, err, e.Metadata)
		}
		// Scores keep full float64 precision through Redis and back: in the submit's reply and in a later read.
		for i, sc := range []float64{0.1, 1e-7, 123456789.123456789, 1 << 53, -(1 << 53), 5e-324 * 1e300,
			-0.30000000000000004, 1<<53 - 1} {
			p := fmt.Sprint("precise", i)
			r := mustSubmit(t, s, lb.Submission{Board: "reads", Player: p, Score: sc})
			if !r.Updated || r.Entry.Score != sc {
				t.Fatalf("score %v came back as %v (updated %v)", sc, r.Entry.Score, r.Updated)
			}
			if e, err := s.Rank(ctx, v, p); err != nil || e.Score != sc {
				t.Fatalf("score %v read back as %+v %v", sc, e, err)
			}
		}
	})
}

func TestSubmitManyAcrossBoards(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		mustBoard(t, s, lb.Board{ID: "bulk-a"})
		mustBoard(t, s, lb.Board{ID: "bulk-b", Mode: lb.Sum, MaxScore: ptr(10.0)})
		subs := []lb.Submission{
			{Board: "bulk-a", Player: "x", Score: 5},
			{Board: "bulk-b", Player: "x", Score: 4},
			{Board: "missing", Player: "x", Score: 1},
			{Board: "bulk-b", Player: "x", Score: 7}, // total 11 > max: this item fails, the others apply
			{Board: "bulk-a", Player: "y", Score: 6},
			{Board: "bulk-b", Player: "x", Score: 6},
			{Board: "bulk-a", Player: "", Score: 1},
			{Board: "bulk-a", Player: "z", Score: 1, EventID: "once"},
			{Board: "bulk-a", Player: "z", Score: 9, EventID: "once"}, // another payload: a conflict, not a retry
			{Board: "bulk-a", Player: "z", Score: 1, EventID: "once"}, // the same payload: a retry
		}
		out, err := s.SubmitMany(ctx, subs)
		if err != nil {
			t.Fatal(err)
		}
		wantErr := []lb.Code{"", "", lb.NotFound, lb.Invalid, "", "", lb.Invalid, "", lb.Conflict, ""}
		for i, o := range out {
			if lb.ErrorCode(o.Err) != wantErr[i] {
				t.Fatalf("item %d: error %v, want code %q", i, o.Err, wantErr[i])
			}
		}
		if out[4].Result.Entry.Rank != 1 || out[5].Result.Entry.Score != 10 || !out[9].Result.Duplicate ||
			out[9].Result.Entry.Score != 1 {
			t.Fatalf("bulk results: %+v %+v %+v", out[4].Result, out[5].Result, out[9].Result)
		}
		if got := topIDs(t, s, lb.View{Board: "bulk-a"}, 10); !slices.Equal(got, []string{"y", "x", "z"}) {
			t.Fatalf("bulk-a: %v", got)
		}
	})
}

func TestRemovePlayerEverywhere(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "rm", Windows: []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly}, ExactTop: 3})
		for i := range 8 {
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i),
				DisplayName: ptr("n")})
		}
		for _, p := range []string{"p7", "p0"} { // one exact, one in the tail
			if ok, err := s.RemovePlayer(ctx, b.ID, p); !ok || err != nil {
				t.Fatalf("remove %s: %v %v", p, ok, err)
			}
			for _, w := range b.Windows {
				v := lb.View{Board: b.ID, Window: w}
				if e, err := s.Rank(ctx, v, p); e != nil || err != nil {
					t.Fatalf("%s still on %s: %+v %v", p, w, e, err)
				}
				if n, _ := s.Size(ctx, v); n != 7-btoi(p == "p0") {
					t.Fatalf("%s size %d after removing %s", w, n, p)
				}
			}
		}
		if ok, err := s.RemovePlayer(ctx, b.ID, "p7"); ok || err != nil {
			t.Fatalf("removing twice: %v %v", ok, err)
		}
		if got := topIDs(t, s, lb.View{Board: b.ID}, 10); !slices.Equal(got, []string{"p6", "p5"}) {
			t.Fatalf("exact tier after removals: %v", got)
		}
		// The tail player with the best score still gets an estimated rank right after the exact tier.
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "p4"); e == nil || !e.Approximate || e.Rank < 3 {
			t.Fatalf("tail after removals: %+v", e)
		}
	})
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// RemovePlayer reaches every period the grace window can still feed, beyond the retained ones: with a 72-hour
// grace on a daily board that keeps one closed period, late scores land up to four days back.
func TestRemovePlayerReachesGracePeriods(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := clockedStore(s, tg, time.Date(2034, 7, 20, 18, 0, 0, 0, time.UTC))
		b := mustBoard(t, s, lb.Board{ID: "grace", Windows: []lb.Window{lb.Daily, lb.Weekly}, Retention: 1, Grace: 72 * time.Hour})
		var periods []string
		for d := 0; d <= 3; d++ {
			r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: float64(d), AchievedAt: clock.Now().AddDate(0, 0, -d)})
			periods = append(periods, r.Period)
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "q", Score: 1, AchievedAt: clock.Now().AddDate(0, 0, -d)})
		}
		if ok, err := s.RemovePlayer(ctx, b.ID, "p"); !ok || err != nil {
			t.Fatalf("remove: %v %v", ok, err)
		}
		for _, w := range b.Windows {
			for _, p := range periods {
				if w == lb.Weekly {
					p = b.Period(lb.Weekly, mustParse(t, p))
				}
				v := lb.View{Board: b.ID, Window: w, Period: p}
				if got := topIDs(t, s, v, 10); !slices.Equal(got, []string{"q"}) {
					t.Fatalf("%s %s after removing p: %v", w, p, got)
				}
			}
		}
	})
}

func mustParse(t *testing.T, day string) time.Time {
	t.Helper()
	d, err := time.Parse("2006-01-02", day)
	if err != nil {
		t.Fatal(err)
	}
	return d.Add(12 * time.Hour)
}

// Every read gives each player their own display name and metadata, players with none and missing players mixed
// in (the scripts fetch them for a whole page at once).
func TestNamesOnEveryRead(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "names"})
		v := lb.View{Board: b.ID}
		names, metas := map[string]string{}, map[string]string{}
		var ids []string
		for i := range 40 {
			p := fmt.Sprintf("p%02d", i)
			sub := lb.Submission{Board: b.ID, Player: p, Score: float64(i)}
			if i%3 == 0 {
				names[p] = "Name " + p
				sub.DisplayName = ptr(names[p])
			}
			if i%4 == 0 {
				metas[p] = fmt.Sprintf(`{"i":%d}`, i)
				sub.Metadata = json.RawMessage(metas[p])
			}
			mustSubmit(t, s, sub)
			ids = append(ids, p)
		}
		check := func(what string, es []lb.Entry) {
			t.Helper()
			for _, e := range es {
				name := ""
				if e.DisplayName != nil {
					name = *e.DisplayName
				}
				if name != names[e.PlayerID] || string(e.Metadata) != metas[e.PlayerID] {
					t.Fatalf("%s: %s has name %q metadata %s, want %q %s", what, e.PlayerID, name, e.Metadata,
						names[e.PlayerID], metas[e.PlayerID])
				}
			}
		}
		p, err := s.Top(ctx, v, 0, 40)
		if err != nil || len(p.Entries) != 40 {
			t.Fatalf("top: %v %v", p, err)
		}
		check("top", p.Entries)
		asked := append([]string{"nobody"}, ids...)
		slices.Reverse(asked[20:])
		asked = append(asked, "ghost")
		p, err = s.Ranks(ctx, v, asked)
		if err != nil || len(p.Entries) != 40 {
			t.Fatalf("ranks: %v %v", p, err)
		}
		check("ranks", p.Entries)
		for _, c := range []string{"p00", "p19", "p39"} {
			es, err := s.Around(ctx, v, c, 4)
			if err != nil || len(es) != 9 {
				t.Fatalf("around %s: %v %v", c, es, err)
			}
			check("around "+c, es)
		}
	})
}
