package leaderboard_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// A calendar period records exactly one close event, after its end plus the board's grace (not before, also
// with a late score inside the grace), whoever asks how often; the event carries the board, window, period, end,
// size and the first closeEventTop ranks as a model ranking computes them and as `top` lists them. Periods nobody
// played record none; a missed week and day are caught up; RecordClose records a period on demand, once.
func TestCloseEvents(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		berlin, _ := time.LoadLocation("Europe/Berlin")
		s, clock := clockedStore(s, tg, time.Date(2030, 3, 13, 12, 0, 0, 0, berlin)) // a Wednesday
		other := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})  // a second process
		b := mustBoard(t, s, lb.Board{ID: "cup {1}", Windows: []lb.Window{lb.Daily, lb.Weekly},
			TimeZone: "Europe/Berlin", Grace: time.Minute, CloseEventTop: 3, Retention: 7})
		if b.CloseEventTop != 3 {
			t.Fatalf("CloseEventTop %d", b.CloseEventTop)
		}
		// The model: scores per player, first arrival order for ties (DESC, BEST).
		type row struct {
			id    string
			score float64
		}
		day := []row{{"p1", 10}, {"p2", 30}, {"p3", 30}, {"p4", 20}, {"p5", 5}}
		for _, r := range day {
			sub := lb.Submission{Board: b.ID, Player: r.id, Score: r.score}
			if r.id == "p2" {
				sub.DisplayName = ptr("Two")
			}
			mustSubmit(t, s, sub)
		}
		due := func(st *lb.Store) []string {
			t.Helper()
			ids, _, err := st.RecordDueCloses(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if ids, next, err := s.RecordDueCloses(ctx, b.ID); err != nil || len(ids) != 0 ||
			!next.Equal(time.Date(2030, 3, 14, 0, 1, 0, 0, berlin)) {
			t.Fatalf("before any close: %v next %v %v", ids, next, err)
		}
		// Inside the grace window: a late score still counts for the 13th, and nothing closes.
		clock.Set(time.Date(2030, 3, 14, 0, 0, 30, 0, berlin))
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p5", Score: 40,
			AchievedAt: time.Date(2030, 3, 13, 23, 59, 0, 0, berlin)})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p6", Score: 1})
		if ids := due(s); len(ids) != 0 {
			t.Fatalf("recorded inside the grace window: %v", ids)
		}
		clock.Set(time.Date(2030, 3, 14, 0, 1, 0, 0, berlin))
		first := due(s)
		if len(first) != 1 {
			t.Fatalf("recorded %v, want one event", first)
		}
		if again, other := due(s), due(other); len(again)+len(other) != 0 {
			t.Fatalf("recorded again: %v %v", again, other)
		}
		evs, err := s.Closes(ctx, b.ID, "0-0", 10)
		if err != nil || len(evs) != 1 || evs[0].OutboxID != first[0] {
			t.Fatalf("outbox %+v %v", evs, err)
		}
		ev := evs[0]
		wantTop := []string{"p5", "p2", "p3"} // 40, 30 (first to 30), 30
		if ev.Board != b.ID || ev.Window != lb.Daily || ev.Period != "2030-03-13" || ev.Size != 5 ||
			!ev.EndedAt.Equal(time.Date(2030, 3, 14, 0, 0, 0, 0, berlin)) || !ev.RecordedAt.Equal(clock.Now()) {
			t.Fatalf("event %+v", ev)
		}
		scores := map[string]float64{"p5": 40, "p2": 30, "p3": 30}
		for i, e := range ev.Top {
			if i >= len(wantTop) || e.PlayerID != wantTop[i] || e.Rank != int64(i+1) || e.Score != scores[e.PlayerID] ||
				e.TopPercent != 100*float64(i+1)/5 || (e.PlayerID == "p2") != (e.DisplayName != nil && *e.DisplayName == "Two") {
				t.Errorf("top[%d] = %+v", i, e)
			}
		}
		if len(ev.Top) != 3 {
			t.Fatalf("top has %d entries", len(ev.Top))
		}
		page, err := other.Top(ctx, lb.View{Board: b.ID, Window: lb.Daily, Period: "2030-03-13"}, 0, 3)
		if err != nil || !reflect.DeepEqual(page.Entries, ev.Top) {
			t.Fatalf("event top %+v\n`top` lists %+v %v", ev.Top, page, err)
		}
		if len(ev.ID()) < 20 || ev.ID() == (&lb.CloseEvent{Board: "other", OutboxID: ev.OutboxID}).ID() {
			t.Errorf("event id %q", ev.ID())
		}

		// A process that was away over the weekend: the 14th (played) and week 11 are recorded, the empty
		// 15th..17th not.
		clock.Set(time.Date(2030, 3, 18, 0, 1, 0, 0, berlin))
		if ids := due(other); len(ids) != 2 {
			t.Fatalf("after the weekend recorded %v, want 2", ids)
		}
		evs, err = s.Closes(ctx, b.ID, first[0], 10)
		if err != nil || len(evs) != 2 {
			t.Fatalf("%+v %v", evs, err)
		}
		if e := evs[0]; e.Window != lb.Daily || e.Period != "2030-03-14" || e.Size != 1 || len(e.Top) != 1 ||
			e.Top[0].PlayerID != "p6" {
			t.Errorf("day 14: %+v", e)
		}
		if e := evs[1]; e.Window != lb.Weekly || e.Period != "2030-W11" || e.Size != 6 ||
			!e.EndedAt.Equal(time.Date(2030, 3, 18, 0, 0, 0, 0, berlin)) || len(e.Top) != 3 ||
			e.Top[0].PlayerID != "p5" || e.Top[1].PlayerID != "p2" || e.Top[2].PlayerID != "p3" {
			t.Errorf("week 11: %+v", e)
		}
		if ids := due(s); len(ids) != 0 {
			t.Errorf("recorded again: %v", ids)
		}

		// On demand (a season's end calls this): once, also for a period nobody played.
		end := time.Date(2030, 3, 17, 0, 0, 0, 0, berlin)
		id, recorded, err := s.RecordClose(ctx, b.ID, lb.Daily, "2030-03-16", end)
		if err != nil || !recorded {
			t.Fatalf("RecordClose: %q %v %v", id, recorded, err)
		}
		id2, recorded, err := other.RecordClose(ctx, b.ID, lb.Daily, "2030-03-16", end)
		if err != nil || recorded || id2 != id {
			t.Fatalf("RecordClose again: %q %v %v, want %q not recorded", id2, recorded, err, id)
		}
		evs, _ = s.Closes(ctx, b.ID, evs[1].OutboxID, 10)
		if len(evs) != 1 || evs[0].OutboxID != id || evs[0].Size != 0 || len(evs[0].Top) != 0 ||
			!evs[0].EndedAt.Equal(end) {
			t.Fatalf("on demand: %+v", evs)
		}
		if last, err := s.LastCloseID(ctx, b.ID); err != nil || last != id {
			t.Errorf("LastCloseID %q %v", last, err)
		}
		for _, c := range []struct {
			board  string
			w      lb.Window
			period string
			code   lb.Code
		}{{b.ID, lb.AllTime, "all", lb.Invalid}, {b.ID, lb.Monthly, "2030-03", lb.Invalid},
			{b.ID, lb.Daily, "2030-3-16", lb.Invalid}, {"nope", lb.Daily, "2030-03-16", lb.NotFound}} {
			if _, _, err := s.RecordClose(ctx, c.board, c.w, c.period, end); lb.ErrorCode(err) != c.code {
				t.Errorf("RecordClose(%q, %s, %q): %v, want %s", c.board, c.w, c.period, err, c.code)
			}
		}
		if evs, _ := s.Closes(ctx, b.ID, id, 10); len(evs) != 0 {
			t.Errorf("refused calls recorded %+v", evs)
		}
	})
}

// closeEventTop: 0 means 100, a negative value none, at most 1000; a board without a top records events with an
// empty top and the size. The outbox keeps the newest OutboxMaxLen events.
func TestCloseEventTopAndOutboxBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &testClock{t: time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)}
	s := lb.New(redistest.SharedStandalone(t).Client(t), lb.Config{Prefix: redistest.Prefix(t), Clock: clock.Now})
	if b := mustBoard(t, s, lb.Board{ID: "def", Windows: []lb.Window{lb.Daily}}); b.CloseEventTop != lb.DefaultCloseEventTop {
		t.Errorf("default CloseEventTop %d", b.CloseEventTop)
	}
	if _, err := s.CreateBoard(ctx, lb.Board{ID: "big", CloseEventTop: lb.MaxCloseEventTop + 1}); lb.ErrorCode(err) != lb.Invalid {
		t.Errorf("closeEventTop 1001: %v", err)
	}
	b := mustBoard(t, s, lb.Board{ID: "none", Windows: []lb.Window{lb.Daily}, CloseEventTop: -1, Retention: 1000})
	if b.CloseEventTop != 0 {
		t.Fatalf("CloseEventTop %d", b.CloseEventTop)
	}
	mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "a", Score: 1})
	clock.Set(clock.Now().Add(24 * time.Hour))
	ids, _, err := s.RecordDueCloses(ctx, b.ID)
	if err != nil || len(ids) != 1 {
		t.Fatalf("%v %v", ids, err)
	}
	evs, _ := s.Closes(ctx, b.ID, "0-0", 1)
	if len(evs) != 1 || evs[0].Size != 1 || len(evs[0].Top) != 0 || evs[0].Period != "2031-06-01" {
		t.Fatalf("%+v", evs)
	}
	day := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range lb.OutboxMaxLen + 5 {
		d := day.AddDate(0, 0, i)
		if _, _, err := s.RecordClose(ctx, b.ID, lb.Daily, d.Format("2006-01-02"), d.AddDate(0, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := s.Closes(ctx, b.ID, "0-0", 2*lb.OutboxMaxLen)
	if err != nil || len(kept) != lb.OutboxMaxLen {
		t.Fatalf("outbox keeps %d, want %d (%v)", len(kept), lb.OutboxMaxLen, err)
	}
	if last := kept[len(kept)-1]; last.Period != day.AddDate(0, 0, lb.OutboxMaxLen+4).Format("2006-01-02") {
		t.Errorf("newest kept %+v", last)
	}
}

// The outbox as consumer groups see it: a group made on first read sees events recorded before it; two
// consumers of one group never read the same event; a pending event can be claimed only once it has been idle
// for the given time, by one consumer, which bumps its delivery count; acknowledged events are no longer pending.
func TestOutboxGroups(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "o", Windows: []lb.Window{lb.Daily}})
		if evs, err := s.OutboxRead(ctx, b.ID, "g", "c1", 10); err != nil || len(evs) != 0 {
			t.Fatalf("no outbox yet: %v %v", evs, err)
		}
		var ids []string
		for _, d := range []string{"2030-01-01", "2030-01-02", "2030-01-03"} {
			id, _, err := s.RecordClose(ctx, b.ID, lb.Daily, d, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		one, err := s.OutboxRead(ctx, b.ID, "g", "c1", 2)
		if err != nil || len(one) != 2 || one[0].OutboxID != ids[0] || one[1].OutboxID != ids[1] {
			t.Fatalf("c1 read %+v %v", one, err)
		}
		two, err := s.OutboxRead(ctx, b.ID, "g", "c2", 10)
		if err != nil || len(two) != 1 || two[0].OutboxID != ids[2] {
			t.Fatalf("c2 read %+v %v", two, err)
		}
		if more, _ := s.OutboxRead(ctx, b.ID, "g", "c2", 10); len(more) != 0 {
			t.Fatalf("read again: %+v", more)
		}
		if err := s.OutboxAck(ctx, b.ID, "g", ids[1]); err != nil {
			t.Fatal(err)
		}
		if ev, err := s.OutboxClaim(ctx, b.ID, "g", "c2", ids[0], time.Hour); err != nil || ev != nil {
			t.Fatalf("claimed before an hour idle: %+v %v", ev, err)
		}
		// Idle times are Redis's real time: the pending events idle 200 ms, claims ask for 100 ms, so a claim
		// right after another one (which resets the idle time) finds nothing unless that takes 100 ms.
		time.Sleep(200 * time.Millisecond)
		p, err := s.OutboxPending(ctx, b.ID, "g", 100*time.Millisecond, 10)
		if err != nil || len(p) != 2 || p[0].OutboxID != ids[0] || p[0].Consumer != "c1" || p[0].Deliveries != 1 ||
			p[1].OutboxID != ids[2] || p[1].Consumer != "c2" {
			t.Fatalf("pending %+v %v", p, err)
		}
		ev, err := s.OutboxClaim(ctx, b.ID, "g", "c2", ids[0], 100*time.Millisecond)
		if err != nil || ev == nil || ev.OutboxID != ids[0] || ev.Period != "2030-01-01" {
			t.Fatalf("claim %+v %v", ev, err)
		}
		if ev, _ := s.OutboxClaim(ctx, b.ID, "g", "c1", ids[0], 100*time.Millisecond); ev != nil {
			t.Fatalf("claimed twice: %+v", ev)
		}
		p, _ = s.OutboxPending(ctx, b.ID, "g", 0, 10)
		if len(p) != 2 || p[0].Consumer != "c2" || p[0].Deliveries != 2 {
			t.Fatalf("after the claim %+v", p)
		}
		if err := s.OutboxDeadLetter(ctx, b.ID, "g", ids[0], "test"); err != nil {
			t.Fatal(err)
		}
		if dead, err := s.DeadLetters(ctx, b.ID, "g"); err != nil || len(dead) != 1 || dead[0] != ids[0] {
			t.Fatalf("dead letters %v %v", dead, err)
		}
		if p, _ = s.OutboxPending(ctx, b.ID, "g", 0, 10); len(p) != 1 || p[0].OutboxID != ids[2] {
			t.Fatalf("pending after ack and dead letter %+v", p)
		}
		if ready, err := s.OutboxesReady(ctx, []string{b.ID, "nothing"}, "h"); err != nil || len(ready) != 1 {
			t.Fatalf("ready %v %v", ready, err)
		}
		st, err := s.OutboxGroupStates(ctx, []string{b.ID}, "h")
		if err != nil || st[b.ID] != (lb.OutboxGroup{Pending: 0, Lag: 3}) {
			t.Fatalf("group h before reading: %+v %v", st, err)
		}
		if st, _ := s.OutboxGroupStates(ctx, []string{b.ID}, "g"); st[b.ID] != (lb.OutboxGroup{Pending: 1, Lag: 0}) {
			t.Fatalf("group g: %+v", st)
		}
		if evs, err := s.OutboxRead(ctx, b.ID, "h", "c1", 10); err != nil || len(evs) != 3 {
			t.Fatalf("a new group reads every kept event: %d %v", len(evs), err)
		}
		if evs, err := s.OutboxRead(ctx, b.ID, "z", "c1", 10); err != nil || len(evs) != 3 {
			t.Fatalf("a group made by its first read reads every kept event: %d %v", len(evs), err)
		}
		// A delivery that gives up after the board was deleted leaves no key behind (no dead-letter stream that
		// outlives the board and shows up when the id is created again).
		if ok, err := s.DeleteBoard(ctx, b.ID); err != nil || !ok {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if err := s.OutboxDeadLetter(ctx, b.ID, "g", ids[2], "late"); err != nil {
			t.Fatal(err)
		}
		if keys := boardKeys(t, s, tg, b.ID); len(keys) != 0 {
			t.Fatalf("keys of the deleted board: %v", keys)
		}
	})
}
