package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedBoardLedger: sharded boards (3 shards, on the 3-primary cluster where the suite has one) of every
// mode, recorded by the ledger. The oracle is an unsharded twin of each that takes the same submissions in the same
// order: every submission's result, every standing (every field but updatedAt, which is the commit's clock), the
// removal, a void and a period's close are the twin's. Then Redis loses everything, and later one shard of one
// board only: each board is restored from the ledger exactly as the live writes made it (updatedAt too), its reads
// answering UNAVAILABLE until then, and writes go on where they stood.
func TestShardedBoardLedger(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 4*time.Minute)
	tgs := targets(t)
	rdb := tgs[len(tgs)-1].rdb(t) // the cluster, when the suite runs one
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(rdb, l, c)
	var boards []string
	for _, b := range boardSpecs("sh") {
		twin := b
		twin.ID += "-twin"
		b.Shards = 3
		for _, x := range []leaderboard.Board{b, twin} {
			if _, err := s.CreateBoard(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		boards = append(boards, b.ID)
	}
	// A board whose only player lives on another shard than shard 0, which announces the close.
	lone := "p000"
	for k := 1; leaderboard.ShardOf(lone, 3) == 0; k++ {
		lone = fmt.Sprintf("p%03d", k)
	}
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "sh-lone", Shards: 3, Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, leaderboard.Submission{Board: "sh-lone", Player: lone, Score: 5}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 9))
	next := 0
	// feedTwins sends n submissions to each board and its twin, 20 to a call, and holds every result to the twin's.
	feedTwins := func(n int) {
		t.Helper()
		for _, board := range boards {
			for sent := 0; sent < n; sent += 20 {
				var subs []leaderboard.Submission
				for range 20 {
					i := next
					next++
					sub := testSubmission(board, i, r, 60)
					subs = append(subs, sub)
					if i%11 == 0 && sub.EventID != "" {
						subs = append(subs, sub) // a retry in the same call
					}
					if i%47 == 0 && i > 0 {
						other := sub
						other.EventID, other.Score = fmt.Sprintf("e%d", i-i%3), sub.Score+1 // another's eventId
						subs = append(subs, other)
					}
				}
				twin := make([]leaderboard.Submission, len(subs))
				for k, sub := range subs {
					twin[k] = sub
					twin[k].Board = board + "-twin"
				}
				got, err := s.SubmitMany(ctx, subs)
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.SubmitMany(ctx, twin)
				if err != nil {
					t.Fatal(err)
				}
				exactTop := int64(map[string]int{"sh-tail": 20}[board])
				for k := range subs {
					if d := sameOutcome(got[k], want[k], exactTop); d != "" {
						t.Fatalf("%s item %d (%+v): %s", board, k, subs[k], d)
					}
				}
			}
		}
	}
	// sameAsTwins holds every current window period of each board (and closed) to its twin's.
	sameAsTwins := func(s *leaderboard.Store, closed []leaderboard.View) {
		t.Helper()
		for _, board := range boards {
			vs := append(views(ctx, t, s, board), closed...)
			for _, v := range vs {
				if v.Board != board {
					continue
				}
				tv := v
				tv.Board += "-twin"
				got, gn, err := standings(ctx, t, s, v)
				if err != nil {
					t.Fatalf("%+v: %v", v, err)
				}
				want, wn, err := standings(ctx, t, s, tv)
				if err != nil {
					t.Fatalf("%+v: %v", tv, err)
				}
				if gn != wn || len(got) != len(want) || len(got) == 0 {
					t.Fatalf("%+v: %d rows of %d, the twin %d of %d", v, len(got), gn, len(want), wn)
				}
				for i := range got {
					g, w := got[i], want[i]
					g.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
					if !reflect.DeepEqual(g, w) {
						t.Fatalf("%+v row %d: %+v, the twin's %+v", v, i, got[i], want[i])
					}
				}
			}
		}
	}

	feedTwins(300)
	sameAsTwins(s, nil)
	for _, board := range boards {
		for _, id := range []string{board, board + "-twin"} {
			if ok, err := s.RemovePlayer(ctx, id, "p001"); err != nil || !ok {
				t.Fatalf("RemovePlayer(%s): %v %v", id, ok, err)
			}
			// e0 is the first submission of the run (the first board's); each board has some e<n> of its own.
			if _, err := s.VoidScoreEvents(ctx, id, []string{"e0", "e300", "e600", "e900"}, "fraud review"); err != nil {
				t.Fatalf("VoidScoreEvents(%s): %v", id, err)
			}
		}
	}
	sameAsTwins(s, nil)

	// The day ends: the daily period closes on both, with the same standings.
	daily := leaderboard.View{Board: "sh-best", Window: leaderboard.Daily}
	res, err := s.Resolve(ctx, daily)
	if err != nil {
		t.Fatal(err)
	}
	daily.Period = res.Period
	c.advance(25 * time.Hour)
	var events [2][]leaderboard.CloseEvent
	for k, id := range []string{"sh-best", "sh-best-twin"} {
		if _, _, err := s.RecordDueCloses(ctx, id); err != nil {
			t.Fatal(err)
		}
		if events[k], err = s.Closes(ctx, id, "0-0", 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(events[0]) != 1 || len(events[1]) != 1 || events[0][0].Size != events[1][0].Size ||
		events[0][0].Period != daily.Period || len(events[0][0].Top) == 0 || len(events[0][0].Top) != len(events[1][0].Top) {
		t.Fatalf("close events: sharded %+v, twin %+v", events[0], events[1])
	}
	for i, e := range events[0][0].Top {
		w := events[1][0].Top[i]
		e.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(e, w) {
			t.Fatalf("close event row %d: %+v, the twin's %+v", i, e, w)
		}
	}
	if _, _, err := s.RecordDueCloses(ctx, "sh-lone"); err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Closes(ctx, "sh-lone", "0-0", 10); err != nil || len(ev) != 1 || ev[0].Size != 1 ||
		len(ev[0].Top) != 1 || ev[0].Top[0].PlayerID != lone || ev[0].Top[0].Score != 5 {
		t.Fatalf("the close of a board with one player on shard %d: %+v %v", leaderboard.ShardOf(lone, 3), ev, err)
	}
	feedTwins(100) // the new day's
	closed := []leaderboard.View{daily}
	sameAsTwins(s, closed)

	// Two processes write one sharded board at once: each applies its rounds in the ledger's order on every shard,
	// waiting for (or catching up) the other's, and the restore below reproduces what they made.
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "sh-conc", Shards: 3, Mode: leaderboard.Sum}); err != nil {
		t.Fatal(err)
	}
	feedFrom(ctx, t, []*leaderboard.Store{s, newStore(rdb, l, c)}, "sh-conc", 400, 40)
	var all []leaderboard.View
	all = append(all, views(ctx, t, s, "sh-conc")...)
	for _, board := range boards {
		all = append(all, views(ctx, t, s, board)...)
		all = append(all, views(ctx, t, s, board+"-twin")...)
	}
	twinDaily := daily
	twinDaily.Board += "-twin"
	all = append(all, daily, twinDaily)
	before := snap(ctx, t, s, all)

	// Redis loses everything: a fresh store (another process, or this one restarted) restores every board.
	flushAll(ctx, t, rdb)
	s2 := newStore(rdb, l, c)
	for _, v := range all {
		_, err := s2.Top(ctx, v, 0, 10)
		if err == nil && (v == daily || v == twinDaily) {
			continue // the closed day's standings, frozen in the ledger once its freeze ran, answer from there
		}
		if leaderboard.ErrorCode(err) != leaderboard.Unavailable {
			t.Fatalf("%+v right after the loss: %v, want UNAVAILABLE", v, err)
		}
	}
	waitRestored(ctx, t, s2, all)
	if d := before.diff(snap(ctx, t, s2, all)); d != "" {
		t.Fatalf("after the loss of everything: %s", d)
	}

	// One shard of one board loses its keys (its primary failed over to a replica without them): the board is
	// restored whole, the others are untouched.
	b, err := s2.Board(ctx, "sh-sum")
	if err != nil {
		t.Fatal(err)
	}
	// The ledger check restores what no read asked for yet (sh-lone), in the background; once the restores are
	// done it finds every board whole...
	untilWhole(ctx, t, s2)
	dropKeys(ctx, t, rdb, s2.ShardKeyBases(b)[2])
	// ...and finds the loss by shard 2 alone (shard 0 is whole), before any read trips on it.
	if n, err := s2.CheckLedger(ctx); err != nil || n != 1 {
		t.Fatalf("the ledger check after one shard's loss: %d boards to restore, %v; want 1", n, err)
	}
	var sum []leaderboard.View
	for _, v := range all {
		if v.Board == "sh-sum" {
			sum = append(sum, v)
		}
	}
	waitRestored(ctx, t, s2, sum)
	if d := before.diff(snap(ctx, t, s2, all)); d != "" {
		t.Fatalf("after the loss of one shard: %s", d)
	}
	// Writes go on from where the ledger stands, on the restored boards and their twins alike.
	s = s2
	feedTwins(100)
	sameAsTwins(s, closed)

	// A sharded board created without the ledger has no durable record to add to: a ledgered store refuses it.
	plain := leaderboard.New(rdb, leaderboard.Config{Prefix: "lt", Clock: c.Now, PublishCommand: leaderboard.PublishNone})
	if _, err := plain.CreateBoard(ctx, leaderboard.Board{ID: "made-plain", Shards: 3}); err != nil {
		t.Fatal(err)
	}
	outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: "made-plain", Player: "p", Score: 1}})
	if err != nil || leaderboard.ErrorCode(outs[0].Err) != leaderboard.Invalid {
		t.Fatalf("a ledgered store's write to a sharded board the ledger does not record: %+v %v, want BAD_USER_INPUT", outs, err)
	}
	if e, err := plain.Rank(ctx, leaderboard.View{Board: "made-plain"}, "p"); err != nil || e != nil {
		t.Fatalf("the refused write landed: %+v, %v", e, err)
	}
}

// sameOutcome says how a sharded board's submission outcome differs from its twin's ("" when it does not): the
// same error code, or the same result but for the clock it was recorded with and the change event it went out in.
// A rank beyond exactTop (0: none) is an estimate on each (from different histograms): only its being one must agree.
func sameOutcome(got, want leaderboard.Outcome, exactTop int64) string {
	if leaderboard.ErrorCode(got.Err) != leaderboard.ErrorCode(want.Err) || (got.Result == nil) != (want.Result == nil) {
		return fmt.Sprintf("%+v %v, the twin's %+v %v", got.Result, got.Err, want.Result, want.Err)
	}
	if got.Result == nil {
		return ""
	}
	g, w := *got.Result, *want.Result
	for _, r := range []*leaderboard.Result{&g, &w} {
		r.Entry.UpdatedAt, r.EventEpoch, r.EventVersion = time.Time{}, "", 0
	}
	if g.Entry.Approximate && w.Entry.Approximate {
		g.Entry.Rank, g.Entry.TieRank, g.Entry.TopPercent = w.Entry.Rank, w.Entry.TieRank, w.Entry.TopPercent
	}
	if exactTop > 0 && g.PreviousRank != nil && w.PreviousRank != nil && (*g.PreviousRank > exactTop || *w.PreviousRank > exactTop) {
		g.PreviousRank = w.PreviousRank
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("%s, the twin's %s", describe(g), describe(w))
	}
	return ""
}

func describe(r leaderboard.Result) string {
	s := fmt.Sprintf("%+v", r)
	if r.PreviousRank != nil {
		s += fmt.Sprintf(" previousRank %d", *r.PreviousRank)
	}
	if r.PreviousScore != nil {
		s += fmt.Sprintf(" previousScore %g", *r.PreviousScore)
	}
	return s
}

// dropKeys deletes every key under a key base, on the node that holds its slot.
func dropKeys(ctx context.Context, t *testing.T, rdb redis.UniversalClient, base string) {
	t.Helper()
	node := redis.Cmdable(rdb)
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var err error
		if node, err = cc.MasterForKey(ctx, base); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := node.Keys(ctx, base+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of %q: %d, %v", base, len(keys), err)
	}
	// One DEL (the keys of a base share its slot): a loss is at once, never a key at a time with restores between.
	if err := node.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}
