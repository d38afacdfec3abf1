package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/ledger"
)

// advance moves the test clock on.
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// closeSubs are n submissions to board in a fixed order, achieved one second apart before the clock's start (so
// every updatedAt is known), with many ties, names, metadata and an eventId on each.
func closeSubs(board string, start time.Time, n, players int) []leaderboard.Submission {
	subs := make([]leaderboard.Submission, n)
	for i := range subs {
		sub := leaderboard.Submission{Board: board, Player: fmt.Sprintf("p%02d", (i*7)%players),
			Score: float64((i * 13) % 9), EventID: fmt.Sprintf("e%d", i),
			AchievedAt: start.Add(-time.Duration(n-i) * time.Second)}
		if i%4 == 0 {
			name := fmt.Sprintf("Name %d", i)
			sub.DisplayName = &name
		}
		if i%5 == 0 {
			sub.Metadata = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		}
		subs[i] = sub
	}
	return subs
}

// submitInOrder submits subs one call of 25 after another: the ledger's order is theirs.
func submitInOrder(ctx context.Context, t *testing.T, s *leaderboard.Store, subs []leaderboard.Submission) {
	t.Helper()
	for i := 0; i < len(subs); i += 25 {
		outs, err := s.SubmitMany(ctx, subs[i:min(i+25, len(subs))])
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

// frozenRows reads version v of a period's frozen standings straight from the tables.
func frozenRows(ctx context.Context, t *testing.T, l *ledger.Ledger, board string, w leaderboard.Window, period string,
	v int) (size int64, reason string, rows []leaderboard.Entry) {
	t.Helper()
	err := l.Pool().QueryRow(ctx, `SELECT c.size, c.reason FROM closes c JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL AND c.win = $2 AND c.period = $3 AND c.version = $4`,
		[]byte(board), string(w), period, v).Scan(&size, &reason)
	if err != nil {
		t.Fatalf("version %d of %s %s: %v", v, w, period, err)
	}
	q, err := l.Pool().Query(ctx, `SELECT s.rank, s.tie_rank, s.player, s.score, s.name, s.meta, s.updated_ms
		FROM standings s JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL AND s.win = $2 AND s.period = $3 AND s.version = $4 ORDER BY s.rank`,
		[]byte(board), string(w), period, v)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for q.Next() {
		var e leaderboard.Entry
		var player, name []byte
		var meta *string
		var ms int64
		if err := q.Scan(&e.Rank, &e.TieRank, &player, &e.Score, &name, &meta, &ms); err != nil {
			t.Fatal(err)
		}
		e.PlayerID = string(player)
		if name != nil {
			n := string(name)
			e.DisplayName = &n
		}
		if meta != nil {
			e.Metadata = json.RawMessage(*meta)
		}
		e.UpdatedAt = time.UnixMilli(ms).UTC()
		e.TopPercent = leaderboard.TopPercent(e.Rank, size)
		rows = append(rows, e)
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return size, reason, rows
}

// sameEntries fails the test unless got equals want in every field a user sees.
func sameEntries(t *testing.T, what string, got, want []leaderboard.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.UpdatedAt.Equal(w.UpdatedAt) {
			t.Fatalf("%s: row %d updatedAt %v, want %v", what, i, g.UpdatedAt, w.UpdatedAt)
		}
		g.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: row %d is %+v, want %+v", what, i, g, w)
		}
	}
}

// checkClosedReads holds every read of a closed period to want (its standings while Redis held it).
func checkClosedReads(ctx context.Context, t *testing.T, s *leaderboard.Store, v leaderboard.View, want []leaderboard.Entry,
	size int64) {
	t.Helper()
	got, n, err := standings(ctx, t, s, v)
	if err != nil {
		t.Fatal(err)
	}
	if n != size {
		t.Fatalf("top: size %d, want %d", n, size)
	}
	sameEntries(t, "top", got, want)
	if n, err := s.Size(ctx, v); err != nil || n != size {
		t.Fatalf("size %d (%v), want %d", n, err, size)
	}
	byID := map[string]leaderboard.Entry{}
	for _, e := range want {
		byID[e.PlayerID] = e
	}
	for i, e := range want {
		r, err := s.Rank(ctx, v, e.PlayerID)
		if err != nil || r == nil {
			t.Fatalf("rank of %s: %v %v", e.PlayerID, r, err)
		}
		sameEntries(t, "rank of "+e.PlayerID, []leaderboard.Entry{*r}, []leaderboard.Entry{e})
		// aroundMe, radius 2, filled in at the edges.
		start := max(0, i-2)
		stop := min(len(want)-1, start+4)
		start = max(0, stop-4)
		around, err := s.Around(ctx, v, e.PlayerID, 2)
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, "around "+e.PlayerID, around, want[start:stop+1])
	}
	if r, err := s.Rank(ctx, v, "nobody"); err != nil || r != nil {
		t.Fatalf("rank of a player without a score: %+v, %v", r, err)
	}
	friends := []string{want[len(want)-1].PlayerID, "nobody", want[0].PlayerID}
	fr, err := s.Friends(ctx, v, want[len(want)/2].PlayerID, friends)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "friends", fr, []leaderboard.Entry{want[0], byID[want[len(want)/2].PlayerID], want[len(want)-1]})
	ps, err := s.Periods(ctx, v.Board, v.Window)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		found = found || (p.Period == v.Period && p.Size == size)
	}
	if !found {
		t.Fatalf("periods %+v lack %s of size %d", ps, v.Period, size)
	}
	sn, err := s.Snapshot(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close(ctx)
	if sn.Size != size || sn.Rows != int64(len(want)) {
		t.Fatalf("export: size %d rows %d, want %d and %d", sn.Size, sn.Rows, size, len(want))
	}
	var rows []leaderboard.Entry
	for off := 0; off < len(want); off += 7 {
		p, err := sn.Page(ctx, off, 7)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p.Entries...)
	}
	sameEntries(t, "export", rows, want)
}

// waitReadable reads v until the board's restore is done (UNAVAILABLE until then).
func waitReadable(ctx context.Context, t *testing.T, s *leaderboard.Store, v leaderboard.View) {
	t.Helper()
	waitRestored(ctx, t, s, []leaderboard.View{v})
}

// A close is a freeze: the period's standings (every row, every field, the size) are in the ledger before the
// close event goes out, the event carries exactly those, and once Redis no longer holds the period (its keys
// expired, then Redis lost everything) every read of it (top, rank, aroundMe, friends, size, periods, export)
// answers what Redis answered while it held it.
func TestCloseFreezes(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pg := pgtest.Shared(t)
			ctx := ctxT(t, 2*time.Minute)
			rdb := tg.rdb(t)
			l := openLedger(t, pg.Database(t))
			c := newClock()
			s := newStore(rdb, l, c)
			for _, mode := range []leaderboard.Mode{leaderboard.Best, leaderboard.Sum} {
				board := "frz-" + string(mode)
				if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: board, Mode: mode, CloseEventTop: 10,
					Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
					t.Fatal(err)
				}
				submitInOrder(ctx, t, s, closeSubs(board, c.Now(), 300, 40))
			}
			type closed struct {
				v    leaderboard.View
				want []leaderboard.Entry
				size int64
			}
			var all []closed
			for _, mode := range []leaderboard.Mode{leaderboard.Best, leaderboard.Sum} {
				board := "frz-" + string(mode)
				v := views(ctx, t, s, board)[0]
				want, size, err := standings(ctx, t, s, v)
				if err != nil {
					t.Fatal(err)
				}
				id, recorded, err := s.RecordClose(ctx, board, leaderboard.Daily, v.Period, c.Now())
				if err != nil || !recorded {
					t.Fatalf("close: %q %v %v", id, recorded, err)
				}
				fsize, reason, frozen := frozenRows(ctx, t, l, board, leaderboard.Daily, v.Period, 1)
				if fsize != size || reason != "" {
					t.Fatalf("frozen size %d reason %q, want %d and none", fsize, reason, size)
				}
				sameEntries(t, "frozen standings", frozen, want)
				evs, err := s.Closes(ctx, board, "0-0", 10)
				if err != nil || len(evs) != 1 {
					t.Fatalf("close events %+v %v", evs, err)
				}
				ev := evs[0]
				if ev.OutboxID != id || ev.Size != size || ev.Version != 1 || ev.Reason != nil {
					t.Fatalf("close event %+v, want id %s size %d version 1", ev, id, size)
				}
				sameEntries(t, "close event", ev.Top, want[:10])
				// Closing again (another process's check) sends nothing more.
				if id2, rec2, err := s.RecordClose(ctx, board, leaderboard.Daily, v.Period, c.Now()); err != nil || rec2 || id2 != id {
					t.Fatalf("closing again: %q %v %v, want %q, not recorded", id2, rec2, err, id)
				}
				all = append(all, closed{v, want, size})
			}
			// The period's keys expire (the clock passes its retention), then Redis loses everything: the
			// restore does not write the expired period, and its reads answer from the frozen standings.
			c.advance(30 * 24 * time.Hour)
			flushAll(ctx, t, rdb)
			s2 := newStore(rdb, l, c)
			for _, x := range all {
				waitReadable(ctx, t, s2, leaderboard.View{Board: x.v.Board})
				// Redis holds nothing of the closed period (the reads below cannot come from there).
				keys, err := scanKeys(ctx, rdb, s2.BoardKeys(x.v.Board))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if strings.Contains(k, x.v.Period) && !strings.Contains(k, ":x:") { // the fence outlives the keys
						t.Fatalf("Redis still holds %q of the expired period", k)
					}
				}
				checkClosedReads(ctx, t, s2, x.v, x.want, x.size)
			}
		})
	}
}

// scanKeys returns the keys matching pattern on every primary.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var out []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return out, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	}
	return out, scan(ctx, rdb.(*redis.Client))
}

// A void corrects the frozen standings of a closed period: a new version with the reason, equal to the standings
// of an oracle board fed the same submissions but the voided ones, and a correction event that carries them;
// the period's reads answer the new version. For BEST, SUM and LATEST boards, on a period Redis still holds and
// on one whose keys expired (recomputed from a scratch replay of the ledger). Voiding again changes nothing.
func TestVoidCorrectsAClosedPeriod(t *testing.T) {
	for _, expired := range []bool{false, true} {
		name := "held"
		if expired {
			name = "expired"
		}
		t.Run(name, func(t *testing.T) {
			pg := pgtest.Shared(t)
			ctx := ctxT(t, 2*time.Minute)
			rdb := redistest.Standalone(t).Client(t)
			l := openLedger(t, pg.Database(t))
			c := newClock()
			s := newStore(rdb, l, c)
			modes := []leaderboard.Mode{leaderboard.Best, leaderboard.Sum, leaderboard.Latest}
			start := c.Now()
			// The events voided: p00's best (i = 200, score 8) and last (i = 280), which change its standing in
			// every mode, and one of another player's.
			voided := map[string]bool{"e200": true, "e280": true, "e7": true}
			ids := []string{"e200", "e280", "e7"}
			var views []leaderboard.View
			for _, mode := range modes {
				for _, oracle := range []bool{false, true} {
					board := "void-" + string(mode)
					if oracle {
						board += "-oracle"
					}
					if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: board, Mode: mode, CloseEventTop: 10,
						Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
						t.Fatal(err)
					}
					subs := closeSubs(board, start, 300, 40)
					if oracle {
						kept := subs[:0]
						for _, sub := range subs {
							if !voided[sub.EventID] {
								kept = append(kept, sub)
							}
						}
						subs = kept
					}
					submitInOrder(ctx, t, s, subs)
					v := leaderboard.View{Board: board, Window: leaderboard.Daily,
						Period: start.UTC().Format("2006-01-02")}
					if _, _, err := s.RecordClose(ctx, board, leaderboard.Daily, v.Period, c.Now()); err != nil {
						t.Fatal(err)
					}
					views = append(views, v)
				}
			}
			if expired {
				c.advance(30 * 24 * time.Hour)
				flushAll(ctx, t, rdb)
				s = newStore(rdb, l, c)
				for _, v := range views {
					waitReadable(ctx, t, s, leaderboard.View{Board: v.Board})
				}
			}
			for k, mode := range modes {
				v, ov := views[2*k], views[2*k+1]
				n, err := s.VoidScoreEvents(ctx, v.Board, ids, "fraud")
				if err != nil || n != 3 {
					t.Fatalf("%s: void: %d, %v; want 3 voided", mode, n, err)
				}
				wsize, _, want := frozenRows(ctx, t, l, ov.Board, ov.Window, ov.Period, 1)
				size, reason, got := frozenRows(ctx, t, l, v.Board, v.Window, v.Period, 2)
				if size != wsize || reason != "fraud" {
					t.Fatalf("%s: version 2 size %d reason %q, want %d and fraud", mode, size, reason, wsize)
				}
				sameEntries(t, string(mode)+": version 2", got, want)
				evs, err := s.Closes(ctx, v.Board, "0-0", 10)
				if err != nil {
					t.Fatal(err)
				}
				last := evs[len(evs)-1]
				if last.Version != 2 || last.Reason == nil || *last.Reason != "fraud" || last.Size != wsize {
					t.Fatalf("%s: correction event %+v, want version 2, reason fraud, size %d", mode, last, wsize)
				}
				if !expired && len(evs) != 2 {
					t.Fatalf("%s: %d close events, want the close and its correction", mode, len(evs))
				}
				sameEntries(t, string(mode)+": correction event", last.Top, want[:10])
				checkClosedReads(ctx, t, s, v, want, wsize)
				// Again: nothing voided, no new version, no new event.
				if n, err := s.VoidScoreEvents(ctx, v.Board, ids, "fraud"); err != nil || n != 0 {
					t.Fatalf("%s: voiding again: %d, %v; want 0", mode, n, err)
				}
				var versions int
				if err := l.Pool().QueryRow(ctx, `SELECT count(*) FROM closes c JOIN boards b USING (board_key)
					WHERE b.id = $1 AND b.deleted_at IS NULL`, []byte(v.Board)).Scan(&versions); err != nil || versions != 2 {
					t.Fatalf("%s: %d versions after voiding again (%v), want 2", mode, versions, err)
				}
				if again, _ := s.Closes(ctx, v.Board, "0-0", 10); len(again) != len(evs) {
					t.Fatalf("%s: voiding again sent %d more events", mode, len(again)-len(evs))
				}
			}
		})
	}
}

// failingFreeze is the ledger of a process that stops after a close's fence and before its freeze: Freeze fails.
type failingFreeze struct{ *ledger.Ledger }

func (failingFreeze) Freeze(context.Context, int64, leaderboard.FrozenPeriod, []leaderboard.Entry, []string) (bool, error) {
	return false, &leaderboard.Error{Code: leaderboard.Unavailable, Message: "stopped before the freeze"}
}

// A close that stopped between its fence and its freeze sends nothing, and leaves the fence waiting; the next
// close check of any process freezes the standings and sends the event with them. On an exactTop board the frozen
// standings are the exact tier: once the period expired, a tail player's rank is null.
func TestFreezeResumesAfterAStop(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	stopped := newStore(rdb, failingFreeze{l}, c)
	const board = "resume"
	if _, err := stopped.CreateBoard(ctx, leaderboard.Board{ID: board, ExactTop: 10, CloseEventTop: 5,
		Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	submitInOrder(ctx, t, stopped, closeSubs(board, c.Now(), 120, 30))
	v := views(ctx, t, stopped, board)[0]
	want, size, err := standings(ctx, t, stopped, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 10 || size != 30 {
		t.Fatalf("%d rows of %d players, want the exact tier of 10 of 30", len(want), size)
	}
	tail := ""
	for i := range 30 {
		if p := fmt.Sprintf("p%02d", i); !slicesContain(want, p) {
			tail = p
			break
		}
	}
	c.advance(24*time.Hour + 10*time.Minute) // the day and its grace are over
	if _, _, err := stopped.RecordDueCloses(ctx, board); leaderboard.ErrorCode(err) != leaderboard.Unavailable {
		t.Fatalf("the close check of the stopping process: %v, want its freeze's error", err)
	}
	f, err := stopped.Fence(ctx, board, leaderboard.Daily, v.Period)
	if err != nil || f == nil || f.OutboxID != "~" {
		t.Fatalf("fence %+v (%v), want one waiting for the freeze", f, err)
	}
	if evs, err := stopped.Closes(ctx, board, "0-0", 10); err != nil || len(evs) != 0 {
		t.Fatalf("events sent before the freeze: %+v %v", evs, err)
	}
	other := newStore(rdb, l, c)
	ids, _, err := other.RecordDueCloses(ctx, board)
	if err != nil || len(ids) != 1 {
		t.Fatalf("the next close check: %v %v, want one event", ids, err)
	}
	fsize, _, frozen := frozenRows(ctx, t, l, board, leaderboard.Daily, v.Period, 1)
	if fsize != size {
		t.Fatalf("frozen size %d, want %d", fsize, size)
	}
	sameEntries(t, "frozen", frozen, want)
	evs, err := other.Closes(ctx, board, "0-0", 10)
	if err != nil || len(evs) != 1 || evs[0].OutboxID != ids[0] || evs[0].Size != size {
		t.Fatalf("events %+v (%v), want the one close of size %d", evs, err, size)
	}
	sameEntries(t, "close event", evs[0].Top, want[:5])
	if f, err := other.Fence(ctx, board, leaderboard.Daily, v.Period); err != nil || f == nil || f.OutboxID != ids[0] {
		t.Fatalf("fence %+v (%v), want the event's id %s", f, err, ids[0])
	}
	// Expired: the exact tier answers from the frozen standings, the tail has no row.
	c.advance(30 * 24 * time.Hour)
	flushAll(ctx, t, rdb)
	after := newStore(rdb, l, c)
	waitReadable(ctx, t, after, leaderboard.View{Board: board})
	got, n, err := standings(ctx, t, after, v)
	if err != nil || n != size {
		t.Fatalf("expired period: size %d (%v), want %d", n, err, size)
	}
	sameEntries(t, "expired period", got, want)
	if r, err := after.Rank(ctx, v, tail); err != nil || r != nil {
		t.Fatalf("rank of tail player %s in the expired period: %+v %v, want none", tail, r, err)
	}
}

func slicesContain(es []leaderboard.Entry, player string) bool {
	for _, e := range es {
		if e.PlayerID == player {
			return true
		}
	}
	return false
}
