package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestDeleteBoard: a board with every kind of key (three windows, a closed period still retained, records of more
// than one record hash, a tail histogram with per-bucket counts, names, eventIds, counters, the watch key) and more
// keys than one purge batch; after DeleteBoard no key matching the board's pattern is left on any node, every read
// and write of it is NOT_FOUND (through the store that deleted it and through a fresh one), the board list no
// longer has it, a second delete is false; created again with the same definition it is empty: no old score,
// record, name, eventId or histogram count shows (an eventId used before applies anew, a tail player's estimated
// rank counts only the new players).
func TestDeleteBoard(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		clock := &testClock{}
		clock.Set(time.Date(2030, 3, 4, 10, 0, 0, 0, time.UTC)) // a Monday
		s = lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
		def := lb.Board{ID: "gone {soon}", Windows: []lb.Window{lb.Daily, lb.AllTime, lb.Weekly}, ExactTop: 5}
		mustBoard(t, s, def)
		const players = 1200 // more than one purge batch of eventId keys alone
		submitAll := func(day int, tag string) {
			var subs []lb.Submission
			for i := range players {
				name := "name" + tag
				subs = append(subs, lb.Submission{Board: def.ID, Player: fmt.Sprintf("p%d", i), Score: float64(i % 97),
					EventID: fmt.Sprintf("ev%d-%d", day, i), DisplayName: &name, Metadata: json.RawMessage(`{"a":1}`)})
			}
			for i := 0; i < len(subs); i += lb.MaxBulk {
				outs, err := s.SubmitMany(ctx, subs[i:min(i+lb.MaxBulk, len(subs))])
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range outs {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
				}
			}
		}
		submitAll(0, "old")
		clock.Set(clock.Now().Add(24 * time.Hour)) // day 1: day 0 is a retained closed period
		submitAll(1, "old")
		if err := s.Watch(ctx, def.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n < players*2 {
			t.Fatalf("the board has %d keys before the deletion, want at least %d", n, players*2)
		}

		ok, err := s.DeleteBoard(ctx, def.ID)
		if err != nil || !ok {
			t.Fatalf("DeleteBoard = %v, %v; want true", ok, err)
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n != 0 {
			t.Fatalf("%d keys of the board left after DeleteBoard", n)
		}
		fresh := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
		for _, st := range []*lb.Store{s, fresh} {
			wantNotFound := func(what string, err error) {
				t.Helper()
				if lb.ErrorCode(err) != lb.NotFound {
					t.Fatalf("%s after delete: %v, want NOT_FOUND", what, err)
				}
			}
			_, err := st.Board(ctx, def.ID)
			wantNotFound("Board", err)
			_, err = st.Top(ctx, lb.View{Board: def.ID}, 0, 10)
			wantNotFound("Top", err)
			_, err = st.Top(ctx, lb.View{Board: def.ID, Window: lb.Daily, Period: "2030-03-04"}, 0, 10)
			wantNotFound("Top of the closed period", err)
			_, err = st.Rank(ctx, lb.View{Board: def.ID}, "p1")
			wantNotFound("Rank", err)
			_, err = st.Submit(ctx, lb.Submission{Board: def.ID, Player: "p1", Score: 1})
			wantNotFound("Submit", err)
			_, err = st.RemovePlayer(ctx, def.ID, "p1")
			wantNotFound("RemovePlayer", err)
			_, err = st.Periods(ctx, def.ID, lb.Daily)
			wantNotFound("Periods", err)
			list, err := st.Boards(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range list {
				if b.ID == def.ID {
					t.Fatal("the deleted board is still listed")
				}
			}
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n != 0 {
			t.Fatalf("%d keys of the board came back after the refused calls", n)
		}
		if ok, err := s.DeleteBoard(ctx, def.ID); ok || err != nil {
			t.Fatalf("second DeleteBoard = %v, %v; want false, nil", ok, err)
		}

		// The same id again, same definition (same SHA-1 for the scripts): it starts empty.
		mustBoard(t, fresh, def)
		if p, err := fresh.Top(ctx, lb.View{Board: def.ID, Window: lb.Daily, Period: "2030-03-04"}, 0, 10); err != nil ||
			p.Size != 0 || len(p.Entries) != 0 {
			t.Fatalf("closed period of the new board: %+v, %v; want empty", p, err)
		}
		if ps, err := fresh.Periods(ctx, def.ID, lb.Daily); err != nil || len(ps) != 0 {
			t.Fatalf("Periods of the new board = %+v, %v; want none", ps, err)
		}
		if w, err := fresh.Watched(ctx, def.ID); err != nil || w {
			t.Fatalf("Watched = %v, %v; want false", w, err)
		}
		// An eventId of the old board applies anew (not a duplicate), with its own score; no old name.
		r, err := fresh.Submit(ctx, lb.Submission{Board: def.ID, Player: "p5", Score: 1000, EventID: "ev1-5"})
		if err != nil || r.Duplicate || !r.Updated || r.PreviousRank != nil || r.Entry.Rank != 1 ||
			r.Entry.DisplayName != nil || r.Entry.Metadata != nil {
			t.Fatalf("first submission to the new board: %+v, %v", r, err)
		}
		// Ten new players: five exact, five in the tail; a tail rank estimated with an old histogram would count
		// the 1200 old players.
		for i := range 10 {
			mustSubmit(t, fresh, lb.Submission{Board: def.ID, Player: fmt.Sprintf("n%d", i), Score: float64(100 - i)})
		}
		for _, w := range []lb.Window{lb.Daily, lb.AllTime, lb.Weekly} {
			v := lb.View{Board: def.ID, Window: w}
			if n, err := fresh.Size(ctx, v); err != nil || n != 11 {
				t.Fatalf("%s size = %d, %v; want 11", w, n, err)
			}
			e, err := fresh.Rank(ctx, v, "n9")
			if err != nil || e == nil || e.Rank > 11 || e.Score != 91 {
				t.Fatalf("%s rank of the last new player: %+v, %v; want at most 11 with score 91", w, e, err)
			}
			if e, err := fresh.Rank(ctx, v, "p1"); err != nil || e != nil {
				t.Fatalf("%s: an old player shows in the new board: %+v, %v", w, e, err)
			}
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n > 40 {
			t.Fatalf("the new board has %d keys; old ones survived?", n)
		}
	})
}

// TestDeleteBoardRacesSubmits: submissions (with eventIds) and reads run while the board is deleted; every one of
// them either succeeds before the deletion or is NOT_FOUND, and when DeleteBoard returns no key of the board is
// left: no submission landed after the deletion to re-create keys.
func TestDeleteBoardRacesSubmits(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		def := lb.Board{ID: "racy", Windows: []lb.Window{lb.AllTime, lb.Daily}, ExactTop: 3}
		mustBoard(t, s, def)
		for i := range 50 {
			mustSubmit(t, s, lb.Submission{Board: def.ID, Player: fmt.Sprintf("seed%d", i), Score: float64(i)})
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				other := lb.New(tg.Client, lb.Config{Prefix: s.Prefix()})
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := other.Submit(ctx, lb.Submission{Board: def.ID, Player: fmt.Sprintf("w%d-%d", w, i%30),
						Score: float64(i), EventID: fmt.Sprintf("e%d-%d", w, i)})
					if err == nil {
						_, err = other.Top(ctx, lb.View{Board: def.ID}, 0, 5)
					}
					if err != nil && lb.ErrorCode(err) != lb.NotFound {
						errs <- err
						return
					}
				}
			}()
		}
		time.Sleep(100 * time.Millisecond) // let the writers get going
		ok, err := s.DeleteBoard(ctx, def.ID)
		if err != nil || !ok {
			t.Fatalf("DeleteBoard = %v, %v", ok, err)
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n != 0 {
			t.Fatalf("%d keys right after DeleteBoard", n)
		}
		time.Sleep(200 * time.Millisecond) // the writers keep trying on the deleted board
		close(stop)
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatalf("a concurrent call failed with something else than NOT_FOUND: %v", err)
		default:
		}
		if n := len(boardKeys(t, s, tg, def.ID)); n != 0 {
			t.Fatalf("%d keys re-created by writes after the deletion", n)
		}
	})
}

// TestInterruptedDeleteFinished: a deletion whose purge never ran (the atomic part done by hand: definition gone,
// tombstone left, every other key still there) is finished by the next CreateBoard of the id (the new board is
// empty and no old key is left besides its own) and, for another board, by DeleteBoard, which reports false
// (there was no board any more) and leaves no key.
func TestInterruptedDeleteFinished(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		interrupt := func(id string) {
			if err := tg.Client.Del(ctx, lb.DefKey(s, id)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := tg.Client.Set(ctx, lb.TombKey(s, id), "tok-"+id, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"again", "retry"} {
			mustBoard(t, s, lb.Board{ID: id, Windows: []lb.Window{lb.AllTime, lb.Daily}})
			for i := range 30 {
				mustSubmit(t, s, lb.Submission{Board: id, Player: fmt.Sprintf("p%d", i), Score: float64(i),
					EventID: fmt.Sprintf("e%d", i)})
			}
			interrupt(id)
		}
		fresh := lb.New(tg.Client, lb.Config{Prefix: s.Prefix()})
		mustBoard(t, fresh, lb.Board{ID: "again", Windows: []lb.Window{lb.AllTime, lb.Daily}})
		if keys := boardKeys(t, s, tg, "again"); len(keys) != 2 || !slices.ContainsFunc(keys, isDefKey) ||
			!slices.ContainsFunc(keys, isCountersKey) { // the definition, and the counters with its creation mark
			t.Fatalf("keys after re-creating an interrupted deletion: %v; want the definition and the counters only", keys)
		}
		if f, err := tg.Client.HKeys(ctx, lb.CountersKey(s.Prefix(), "again")).Result(); err != nil || !slices.Equal(f, []string{"born"}) {
			t.Fatalf("counters after re-creating an interrupted deletion: %v, %v; want the creation mark only", f, err)
		}
		if r := mustSubmit(t, fresh, lb.Submission{Board: "again", Player: "p1", Score: 1, EventID: "e1"}); r.Duplicate ||
			r.PreviousRank != nil || r.Entry.Rank != 1 {
			t.Fatalf("first submission to the re-created board: %+v", r)
		}
		if ok, err := fresh.DeleteBoard(ctx, "retry"); ok || err != nil {
			t.Fatalf("DeleteBoard of an interrupted deletion = %v, %v; want false, nil", ok, err)
		}
		if keys := boardKeys(t, s, tg, "retry"); len(keys) != 0 {
			t.Fatalf("keys left after finishing an interrupted deletion: %v", keys)
		}
	})
}

// A board's creation mark (BoardMarkNow, and ClosesMarked, which reads it with the events) tells a board created again
// with the same definition from the one before, on a board of one shard and on a sharded one (shard 0's mark); the
// same board read twice keeps it.
func TestBoardMarkTellsABoardCreatedAgain(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) { boardMarkTells(t, s) })
	// The rule itself: a restore leaves no mark (not created again), a creation always leaves one.
	for _, c := range []struct {
		then, now lb.BoardMark
		want      bool
	}{
		{lb.BoardMark{"d", "x"}, lb.BoardMark{"d", "x"}, false}, {lb.BoardMark{"d", "x"}, lb.BoardMark{"d", ""}, false},
		{lb.BoardMark{"d", ""}, lb.BoardMark{"d", ""}, false}, {lb.BoardMark{"d", "x"}, lb.BoardMark{"d", "y"}, true},
		{lb.BoardMark{"d", ""}, lb.BoardMark{"d", "y"}, true}, {lb.BoardMark{"d", "x"}, lb.BoardMark{"e", "x"}, true},
	} {
		if got := c.now.RecreatedSince(c.then); got != c.want {
			t.Errorf("%+v.RecreatedSince(%+v) = %v", c.now, c.then, got)
		}
	}
}

func boardMarkTells(t *testing.T, s *lb.Store) {
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		def := lb.Board{ID: fmt.Sprintf("born-%d", shards), Shards: shards}
		if _, err := s.CreateBoard(ctx, def); err != nil {
			t.Fatal(err)
		}
		m1, err := s.BoardMarkNow(ctx, def.ID)
		if err != nil || m1.Born == "" || m1.Def == "" {
			t.Fatalf("shards %d: BoardMarkNow = %+v, %v; want a definition and a creation mark", shards, m1, err)
		}
		if _, m, err := s.ClosesMarked(ctx, def.ID, "0-0", 10); err != nil || m != m1 {
			t.Fatalf("shards %d: the mark read with the close events = %+v, %v; want %+v", shards, m, err, m1)
		}
		if _, err := s.DeleteBoard(ctx, def.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BoardMarkNow(ctx, def.ID); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("shards %d: BoardMarkNow of a deleted board: %v, want NOT_FOUND", shards, err)
		}
		if _, _, err := s.ClosesMarked(ctx, def.ID, "0-0", 10); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("shards %d: ClosesMarked of a deleted board: %v, want NOT_FOUND", shards, err)
		}
		if _, err := s.CreateBoard(ctx, def); err != nil {
			t.Fatal(err)
		}
		m2, err := s.BoardMarkNow(ctx, def.ID)
		if err != nil || m2.Def != m1.Def || !m2.RecreatedSince(m1) {
			t.Fatalf("shards %d: created again with the same definition: %+v (before %+v), %v; want another mark",
				shards, m2, m1, err)
		}
	}
}

// isDefKey and isCountersKey tell a board's definition and counters keys (keyDef, keyCounters) in a key list.
func isDefKey(k string) bool      { return strings.HasSuffix(k, ":def") }
func isCountersKey(k string) bool { return strings.HasSuffix(k, ":c") }
