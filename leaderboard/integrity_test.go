package leaderboard_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// snapshot returns the contents of every key of a board: type, value (sorted where Redis keeps no order) and
// whether it has a TTL. Two equal snapshots mean nothing of the board changed.
func snapshot(t *testing.T, s *lb.Store, tg redistest.Target, board string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range boardKeys(t, s, tg, board) {
		typ, err := tg.Client.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v string
		switch typ {
		case "string":
			v = tg.Client.Get(ctx, k).Val()
		case "hash":
			m := tg.Client.HGetAll(ctx, k).Val()
			for _, f := range slices.Sorted(maps.Keys(m)) {
				v += f + "=" + m[f] + ";"
			}
		case "zset":
			for _, z := range tg.Client.ZRangeWithScores(ctx, k, 0, -1).Val() {
				v += fmt.Sprintf("%v:%v;", z.Member, z.Score)
			}
		case "set":
			v = strings.Join(slices.Sorted(slices.Values(tg.Client.SMembers(ctx, k).Val())), ";")
		default:
			t.Fatalf("key %s of type %s", k, typ)
		}
		ttl := tg.Client.TTL(ctx, k).Val()
		out[k] = fmt.Sprintf("%s %s ttl=%v", typ, v, ttl > 0)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if maps.Equal(before, after) {
		return
	}
	for k, v := range after {
		if before[k] != v {
			t.Errorf("%s: key %s\n  before %q\n  after  %q", what, k, before[k], v)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: key %s vanished", what, k)
		}
	}
	t.FailNow()
}

// Each item of a batch is refused with nothing written or applied whole, whatever stage refuses it; the replies
// say which, and the others are applied.
func TestRefusedItemsWriteNothing(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "whole", Mode: lb.Sum, Windows: []lb.Window{lb.Daily, lb.AllTime}, ExactTop: 2,
			MaxScore: ptr(float64(1 << 53))})
		for i := range 4 {
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprint("p", i), Score: float64(i), EventID: fmt.Sprint("e", i)})
		}
		// The all-time total of "big" is near the bound, its daily total is not: only the second window refuses.
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "big", Score: 1<<53 - 1})
		refused := []struct {
			sub  lb.Submission
			code lb.Code
		}{
			{lb.Submission{Board: b.ID, Player: "big", Score: 2}, lb.Invalid},                           // total beyond 2^53 in ALL_TIME
			{lb.Submission{Board: b.ID, Player: "p9", Score: 5, EventID: "e1"}, lb.Conflict},            // eventId of another player
			{lb.Submission{Board: b.ID, Player: "p1", Score: 5, EventID: "e1"}, lb.Conflict},            // eventId with another score
			{lb.Submission{Board: b.ID, Player: "p2", Score: 1e300, DisplayName: ptr("x")}, lb.Invalid}, // beyond the bound
		}
		entries := func(p string) string {
			var out []string
			for _, w := range b.Windows {
				// Ranks and topPercent move as the batch's other items join; the player's own fields must not.
				if e, _ := s.Rank(ctx, lb.View{Board: b.ID, Window: w}, p); e != nil {
					name := "<nil>"
					if e.DisplayName != nil {
						name = *e.DisplayName
					}
					out = append(out, fmt.Sprintf("%v %v %q %s", e.Score, e.UpdatedAt, name, e.Metadata))
				} else {
					out = append(out, "none")
				}
			}
			return strings.Join(out, " ")
		}
		for i, c := range refused {
			was := entries(c.sub.Player)
			out, err := s.SubmitMany(ctx, []lb.Submission{
				{Board: b.ID, Player: "a", Score: 1}, c.sub, {Board: b.ID, Player: "z", Score: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if lb.ErrorCode(out[1].Err) != c.code || out[1].Result != nil {
				t.Fatalf("%+v: %+v, want %s", c.sub, out[1], c.code)
			}
			if now := entries(c.sub.Player); now != was {
				t.Fatalf("refused %+v changed the player:\n  before %s\n  after  %s", c.sub, was, now)
			}
			for _, k := range []int{0, 2} {
				if out[k].Err != nil || out[k].Result.Entry.Score != float64(i+1) {
					t.Fatalf("item %d beside a refused one: %+v %v", k, out[k].Result, out[k].Err)
				}
			}
		}
		// A refusal changes no key at all (compared key by key, contents included).
		before := snapshot(t, s, tg, b.ID)
		for _, c := range refused {
			if _, err := s.Submit(ctx, c.sub); lb.ErrorCode(err) != c.code {
				t.Fatalf("%+v: %v, want %s", c.sub, err, c.code)
			}
			sameSnapshot(t, fmt.Sprintf("refused %+v", c.sub), before, snapshot(t, s, tg, b.ID))
		}
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID, Window: lb.AllTime}, "big"); e.Score != 1<<53-1 {
			t.Fatalf("big: %+v", e)
		}
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID, Window: lb.Daily}, "big"); e.Score != 1<<53-1 {
			t.Fatalf("the daily total changed although the all-time window refused it: %+v", e)
		}
	})
}

// Stored data the scripts cannot read (here a names entry that is not JSON) never makes a submission fail half
// way: the submission is applied whole.
func TestUnreadableNamesEntryIsReplaced(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "names", Windows: []lb.Window{lb.AllTime, lb.Daily}})
		if err := tg.Client.HSet(ctx, lb.NamesKey(s, b.ID), "p", "{not json").Err(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: 7, DisplayName: ptr("Pat")})
		if err != nil || r.Entry.Rank != 1 || r.Entry.DisplayName == nil || *r.Entry.DisplayName != "Pat" {
			t.Fatalf("submit: %+v %v", r, err)
		}
		for _, w := range b.Windows {
			if e, _ := s.Rank(ctx, lb.View{Board: b.ID, Window: w}, "p"); e == nil || e.Score != 7 || *e.DisplayName != "Pat" {
				t.Fatalf("%s: %+v", w, e)
			}
		}
	})
}

// createLeaderboard lists the board in the same script that stores its definition: in the list of the board's
// slot, which lives in the same cluster slot as the definition.
func TestCreateRegistersInOneStep(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		var ids []string
		for _, id := range append([]string{"a", "b", "zz"}, hostileIDs...) {
			mustBoard(t, s, lb.Board{ID: id})
			ids = append(ids, id)
			in, err := tg.Client.SIsMember(ctx, lb.RegistryKey(s, id), id).Result()
			if err != nil || !in {
				t.Fatalf("%q is not in its board list: %v %v", id, in, err)
			}
			if tg.Cluster {
				d := tg.Client.ClusterKeySlot(ctx, lb.DefKey(s, id)).Val()
				if r := tg.Client.ClusterKeySlot(ctx, lb.RegistryKey(s, id)).Val(); r != d {
					t.Fatalf("%q: board list in slot %d, definition in slot %d", id, r, d)
				}
			}
		}
		list, err := s.Boards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range list {
			got = append(got, b.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(got, ids) {
			t.Fatalf("Boards: %q, want %q", got, ids)
		}
		// A refused creation (conflict) lists nothing new and changes nothing.
		if _, err := s.CreateBoard(ctx, lb.Board{ID: "a", Order: lb.Asc}); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("conflict: %v", err)
		}
	})
}

// An achievedAt before MinAchievedAt is bad input; from it on every record reads back right, so a player is never
// listed twice (the 1900 case of the review: an 11-character timestamp misread the arrival token).
func TestAchievedAtRange(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "old"})
		v := lb.View{Board: b.ID}
		before := snapshot(t, s, tg, b.ID)
		for _, at := range []time.Time{time.Date(1900, 1, 1, 0, 0, 1, 0, time.UTC), lb.MinAchievedAt.Add(-time.Second),
			time.Unix(-1, 0)} {
			if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: 10, AchievedAt: at}); lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("achievedAt %v: %v", at, err)
			}
		}
		sameSnapshot(t, "refused achievedAt", before, snapshot(t, s, tg, b.ID))
		first := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 10, AchievedAt: lb.MinAchievedAt})
		if !first.Entry.UpdatedAt.Equal(lb.MinAchievedAt) {
			t.Fatalf("updatedAt %v", first.Entry.UpdatedAt)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 20})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "q", Score: 15, AchievedAt: lb.MinAchievedAt.Add(time.Second)})
		p, err := s.Top(ctx, v, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size != 2 || len(p.Entries) != 2 || p.Entries[0].PlayerID != "p" || p.Entries[0].Score != 20 ||
			p.Entries[1].PlayerID != "q" || !p.Entries[1].UpdatedAt.Equal(lb.MinAchievedAt.Add(time.Second)) {
			t.Fatalf("top: %+v", p)
		}
		if ok, err := s.RemovePlayer(ctx, b.ID, "p"); !ok || err != nil {
			t.Fatalf("remove: %v %v", ok, err)
		}
		if got := topIDs(t, s, v, 10); !slices.Equal(got, []string{"q"}) {
			t.Fatalf("after removal: %v", got)
		}
	})
}

// An eventId stands for one submission: the same payload again is a duplicate, any other payload (player,
// score, achievedAt) is a conflict that applies nothing.
func TestEventIDConflicts(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := clockedStore(s, tg, time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC))
		b := mustBoard(t, s, lb.Board{ID: "ev", Windows: []lb.Window{lb.AllTime, lb.Daily}})
		at := clock.Now().Add(-time.Minute)
		first := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "ann", Score: 10, EventID: "m1", AchievedAt: at})
		before := snapshot(t, s, tg, b.ID)
		for _, c := range []lb.Submission{
			{Board: b.ID, Player: "bob", Score: 10, EventID: "m1", AchievedAt: at},
			{Board: b.ID, Player: "ann", Score: 11, EventID: "m1", AchievedAt: at},
			{Board: b.ID, Player: "ann", Score: 10, EventID: "m1", AchievedAt: at.Add(time.Second)},
			{Board: b.ID, Player: "ann", Score: 10, EventID: "m1"},
		} {
			if r, err := s.Submit(ctx, c); lb.ErrorCode(err) != lb.Conflict || r != nil {
				t.Fatalf("%+v: %+v %v, want CONFLICT", c, r, err)
			}
		}
		sameSnapshot(t, "conflicting eventIds", before, snapshot(t, s, tg, b.ID))
		if e, _ := s.Rank(ctx, lb.View{Board: b.ID}, "bob"); e != nil {
			t.Fatalf("bob got a score from ann's eventId: %+v", e)
		}
		clock.Set(clock.Now().Add(time.Hour)) // a retry later, with another name: still the same submission
		again, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "ann", Score: 10, EventID: "m1", AchievedAt: at,
			DisplayName: ptr("Ann")})
		if err != nil || !again.Duplicate || again.Entry.Rank != first.Entry.Rank || again.Entry.Score != 10 ||
			!again.Entry.UpdatedAt.Equal(first.Entry.UpdatedAt) || again.Period != first.Period {
			t.Fatalf("retry: %+v %v (first %+v)", again, err, first)
		}
	})
}

// Scores and SUM totals: a total beyond 2^53 is refused, a delta is never lost without a word.
func TestSumTotalsAreExact(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		for _, order := range []lb.Order{lb.Desc, lb.Asc} {
			b := mustBoard(t, s, lb.Board{ID: "sum-" + string(order), Mode: lb.Sum, Order: order})
			v := lb.View{Board: b.ID}
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1<<53 - 1})
			for _, d := range []float64{2, 3, 1<<53 - 1} {
				if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: d}); lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("%s: (2^53-1) + %v: %v", order, d, err)
				}
			}
			if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1}); !r.Updated || r.Entry.Score != 1<<53 {
				t.Fatalf("%s: the total 2^53: %+v", order, r.Entry)
			}
			for _, d := range []float64{1, 0.5, 1e-3} {
				if r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p", Score: d}); lb.ErrorCode(err) != lb.Invalid {
					t.Fatalf("%s: 2^53 + %v: %+v %v, want BAD_USER_INPUT", order, d, r, err)
				}
			}
			if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: -(1 << 53)}); r.Entry.Score != 0 {
				t.Fatalf("%s: 2^53 - 2^53: %+v", order, r.Entry)
			}
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "q", Score: -(1 << 53)})
			if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "q", Score: -1}); lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("%s: -2^53 - 1: %v", order, err)
			}
			// A delta too small to change a total is refused, not dropped.
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "r", Score: 1e15})
			if _, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "r", Score: 1e-6}); lb.ErrorCode(err) != lb.Invalid {
				t.Fatalf("%s: a lost delta: %v", order, err)
			}
			if e, _ := s.Rank(ctx, v, "r"); e.Score != 1e15 {
				t.Fatalf("%s: r: %+v", order, e)
			}
		}
	})
}

// The arrival counter of a window period counts to 2^63 - 1: ties keep their order across the points where a
// counter of six base-62 digits wrapped and where the counter's low 32-bit part carries.
func TestArrivalCounterNeverWraps(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		for _, start := range []uint64{62*62*62*62*62*62 - 3, 1<<32 - 3, 1<<63 - 5} {
			b := mustBoard(t, s, lb.Board{ID: fmt.Sprint("seq-", start), Mode: lb.Latest})
			if err := lb.SetArrivalCounter(ctx, s, b.ID, lb.AllTime, lb.AllPeriod, start); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range 4 {
				p := fmt.Sprint("p", i)
				want = append(want, p)
				if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p, Score: 7}); r.Entry.Rank != int64(i+1) {
					t.Fatalf("counter from %d: %s ranks %d", start, p, r.Entry.Rank)
				}
			}
			if got := topIDs(t, s, lb.View{Board: b.ID}, 10); !slices.Equal(got, want) {
				t.Fatalf("counter from %d: %v", start, got)
			}
			if start == 1<<63-5 {
				// 2^63 - 1 is the last arrival; one more change is refused and changes nothing.
				before := snapshot(t, s, tg, b.ID)
				_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "p0", Score: 8})
				if lb.ErrorCode(err) != lb.Internal {
					t.Fatalf("after 2^63 - 1 arrivals: %v", err)
				}
				sameSnapshot(t, "exhausted counter", before, snapshot(t, s, tg, b.ID))
				if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p0", Score: 7}); r.Updated {
					t.Fatalf("an unchanged score needs no arrival: %+v", r)
				}
			}
		}
	})
}

// A board that vanished, or was created again with another definition (Redis lost its data), is noticed by
// every process at its next script: NOT_FOUND, or the new definition.
func TestDefinitionChangesAreNoticed(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		old := lb.New(tg.Client, lb.Config{Prefix: s.Prefix()}) // another process, which cached the first definition
		mustBoard(t, old, lb.Board{ID: "re", Order: lb.Desc})
		mustSubmit(t, old, lb.Submission{Board: "re", Player: "a", Score: 10})
		wipe := func() {
			for _, k := range boardKeys(t, s, tg, "re") {
				tg.Client.Del(ctx, k)
			}
		}
		wipe()
		if _, err := old.Submit(ctx, lb.Submission{Board: "re", Player: "a", Score: 1}); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("submit to a vanished board: %v", err)
		}
		if _, err := old.Top(ctx, lb.View{Board: "re"}, 0, 10); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("top of a vanished board: %v", err)
		}
		mustBoard(t, old, lb.Board{ID: "re", Order: lb.Desc})
		mustSubmit(t, old, lb.Submission{Board: "re", Player: "a", Score: 10})
		wipe()
		mustBoard(t, s, lb.Board{ID: "re", Order: lb.Asc}) // re-created elsewhere, lower is better now
		mustSubmit(t, old, lb.Submission{Board: "re", Player: "a", Score: 10})
		r := mustSubmit(t, old, lb.Submission{Board: "re", Player: "b", Score: 5})
		if r.Entry.Rank != 1 {
			t.Fatalf("the old process still ranks by the old order: %+v", r.Entry)
		}
		if got := topIDs(t, old, lb.View{Board: "re"}, 10); !slices.Equal(got, []string{"b", "a"}) {
			t.Fatalf("top through the old process: %v", got)
		}
		if b, _ := old.Board(ctx, "re"); b.Order != lb.Asc {
			t.Fatalf("the old process kept order %s", b.Order)
		}
		if ok, err := old.RemovePlayer(ctx, "re", "a"); !ok || err != nil {
			t.Fatalf("remove: %v %v", ok, err)
		}
	})
}

// The names hash of a board without ALL_TIME expires with the board's last period written; with ALL_TIME it
// stays, like the all-time records.
func TestNamesExpireWithTheLastPeriod(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		clock := &testClock{}
		s = lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
		daily := mustBoard(t, s, lb.Board{ID: "daily", Windows: []lb.Window{lb.Daily}, Retention: 2})
		mustSubmit(t, s, lb.Submission{Board: daily.ID, Player: "p", Score: 1, DisplayName: ptr("P")})
		ttl := func(k string) time.Duration { return tg.Client.TTL(ctx, k).Val() }
		near := func(what string, got, want time.Duration) {
			t.Helper()
			if got > want || got < want-5*time.Second {
				t.Fatalf("%s: names TTL %v, want %v", what, got, want)
			}
		}
		// 23:59: today's period is kept through the next two days and the grace, until 13 February 00:05.
		clock.Set(time.Date(2029, 2, 10, 23, 59, 0, 0, time.UTC))
		mustSubmit(t, s, lb.Submission{Board: daily.ID, Player: "p", Score: 1, DisplayName: ptr("P")})
		near("first", ttl(lb.NamesKey(s, daily.ID)), time.Date(2029, 2, 13, 0, 5, 0, 0, time.UTC).Sub(clock.Now()))
		// Two minutes later a new period extends it (to 14 February 00:05), even without a name...
		clock.Set(time.Date(2029, 2, 11, 0, 1, 0, 0, time.UTC))
		mustSubmit(t, s, lb.Submission{Board: daily.ID, Player: "q", Score: 1})
		want := time.Date(2029, 2, 14, 0, 5, 0, 0, time.UTC).Sub(clock.Now())
		near("a later period", ttl(lb.NamesKey(s, daily.ID)), want)
		// ...and a late score for the day before, whose keys expire earlier, does not shorten it.
		mustSubmit(t, s, lb.Submission{Board: daily.ID, Player: "r", Score: 1, DisplayName: ptr("R"),
			AchievedAt: time.Date(2029, 2, 10, 23, 59, 30, 0, time.UTC)})
		near("a late score", ttl(lb.NamesKey(s, daily.ID)), want)
		all := mustBoard(t, s, lb.Board{ID: "all", Windows: []lb.Window{lb.Daily, lb.AllTime}})
		mustSubmit(t, s, lb.Submission{Board: all.ID, Player: "p", Score: 1, DisplayName: ptr("P")})
		if got := ttl(lb.NamesKey(s, all.ID)); got != -1 {
			t.Fatalf("names of an ALL_TIME board: TTL %v, want none", got)
		}
	})
}
