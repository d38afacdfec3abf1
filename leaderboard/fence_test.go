package leaderboard_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// eachFenceTarget is eachTarget and the embedded store (`make run`'s miniredis, where the scripts run with EVALSHA
// in gopher-lua): the fence lives in the scripts, which each of them runs. Stores there publish nothing (miniredis
// has no sharded pub/sub): make them with clockedStore.
func eachFenceTarget(t *testing.T, f func(t *testing.T, s *lb.Store, tg redistest.Target)) {
	t.Helper()
	eachTarget(t, f)
	t.Run("embedded", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		f(t, lb.New(c, lb.Config{Prefix: redistest.Prefix(t), PublishCommand: lb.PublishNone}),
			redistest.Target{Name: "embedded", Client: c})
	})
}

// closeEventOf returns the one close event of a window period in the board's outbox.
func closeEventOf(t *testing.T, s *lb.Store, board string, w lb.Window, period string) lb.CloseEvent {
	t.Helper()
	evs, err := s.Closes(context.Background(), board, "0-0", lb.OutboxMaxLen)
	if err != nil {
		t.Fatal(err)
	}
	var found []lb.CloseEvent
	for _, e := range evs {
		if e.Window == w && e.Period == period {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("close events of %s %s: %+v, want one", w, period, found)
	}
	return found[0]
}

// assertFinal fails unless the period of a close event holds what the event announced: its size, and as its
// first ranks the event's top, entry for entry, as `top` reads them now (a second read path).
func assertFinal(t *testing.T, s *lb.Store, ev lb.CloseEvent) {
	t.Helper()
	page, err := s.Top(context.Background(), lb.View{Board: ev.Board, Window: ev.Window, Period: ev.Period}, 0, lb.MaxFirst)
	if err != nil {
		t.Fatal(err)
	}
	if page.Size != ev.Size || len(page.Entries) < len(ev.Top) {
		t.Fatalf("the close event of %s %s announced size %d and %d top rows; the period holds size %d, %d rows",
			ev.Window, ev.Period, ev.Size, len(ev.Top), page.Size, len(page.Entries))
	}
	for i, e := range ev.Top {
		if !reflect.DeepEqual(page.Entries[i], e) {
			t.Fatalf("the close event of %s %s announced rank %d %+v; the period holds %+v", ev.Window, ev.Period,
				i+1, e, page.Entries[i])
		}
	}
}

// The finding, for seasons: in the second after a season's end plus the grace, the close check records the
// event (winner a, size 1) and a late score achieved inside the season arrives after it. The late score is
// refused (PERIOD_CLOSED: SEASON is the board's only window) and the season keeps what the event announced, also
// when an admin removes its winner later.
func TestClosedSeasonRefusesLateScoreInTheSameSecond(t *testing.T) {
	t.Parallel()
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		b := mustBoard(t, s, lb.Board{ID: "fence-season", Windows: []lb.Window{lb.Season}, Grace: time.Minute})
		end := t0.Add(time.Hour)
		if _, err := s.StartSeason(ctx, b.ID, "s1", end); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "a", Score: 10})
		clock.Set(end.Add(time.Minute + 500*time.Millisecond)) // half a second after end + grace
		if ids, _, err := s.RecordDueCloses(ctx, b.ID); err != nil || len(ids) != 1 {
			t.Fatalf("close check: %v %v, want one event", ids, err)
		}
		_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "b", Score: 20, AchievedAt: end.Add(-time.Second)})
		if lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("a late score after the close event: %v, want PERIOD_CLOSED", err)
		}
		ev := closeEventOf(t, s, b.ID, lb.Season, "s1")
		if ev.Size != 1 || len(ev.Top) != 1 || ev.Top[0].PlayerID != "a" {
			t.Fatalf("event %+v, want a alone", ev)
		}
		assertFinal(t, s, ev)
		clock.Set(end.Add(time.Hour))
		if _, err := s.RemovePlayer(ctx, b.ID, "a"); lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("removing a player whose only score is in a closed season: %v, want PERIOD_CLOSED", err)
		}
		assertFinal(t, s, ev)
	})
}

// The finding, for calendar periods: a server whose clock is two seconds behind (or a request whose clock was
// read before a write slot, the batcher or the network delayed it) still takes a late score for a day whose close
// another server has recorded. The script refuses it: the whole submission, ALL_TIME included, as for any late
// score past the grace; in a bulk call that item alone. removePlayer leaves the closed day as it is and removes
// the player from the open windows. The day keeps what its close event announced.
func TestClosedDayRefusesLateScoreFromALaggingClock(t *testing.T) {
	t.Parallel()
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		day := time.Date(2031, 7, 1, 10, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, day)
		lagging := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), PublishCommand: s.PublishCommand(),
			Clock: func() time.Time { return clock.Now().Add(-2 * time.Second) }})
		b := mustBoard(t, s, lb.Board{ID: "fence-day", Windows: []lb.Window{lb.AllTime, lb.Daily}, Grace: time.Minute})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "a", Score: 10})
		end := time.Date(2031, 7, 2, 0, 0, 0, 0, time.UTC)
		clock.Set(end.Add(time.Minute + time.Second)) // the lagging clock: a second inside the grace
		if ids, _, err := s.RecordDueCloses(ctx, b.ID); err != nil || len(ids) != 1 {
			t.Fatalf("close check: %v %v, want one event", ids, err)
		}
		late := lb.Submission{Board: b.ID, Player: "b", Score: 20, AchievedAt: end.Add(-time.Second)}
		if _, err := lagging.Submit(ctx, late); lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("a late score after the close event: %v, want PERIOD_CLOSED", err)
		}
		if ids := topIDs(t, s, lb.View{Board: b.ID, Window: lb.AllTime}, 10); !slices.Equal(ids, []string{"a"}) {
			t.Fatalf("ALL_TIME %v after a refused submission, want [a]", ids)
		}
		out, err := lagging.SubmitMany(ctx, []lb.Submission{late, {Board: b.ID, Player: "c", Score: 5}})
		if err != nil || lb.ErrorCode(out[0].Err) != lb.PeriodClosed || out[1].Err != nil {
			t.Fatalf("bulk: %+v %v, want the late item PERIOD_CLOSED and the other applied", out, err)
		}
		ev := closeEventOf(t, s, b.ID, lb.Daily, "2031-07-01")
		if ev.Size != 1 || len(ev.Top) != 1 || ev.Top[0].PlayerID != "a" {
			t.Fatalf("event %+v, want a alone", ev)
		}
		assertFinal(t, s, ev)
		if ok, err := lagging.RemovePlayer(ctx, b.ID, "a"); err != nil || !ok {
			t.Fatalf("removePlayer: %v %v", ok, err)
		}
		if ids := topIDs(t, s, lb.View{Board: b.ID, Window: lb.AllTime}, 10); !slices.Equal(ids, []string{"c"}) {
			t.Fatalf("ALL_TIME %v after removing a, want [c]", ids)
		}
		assertFinal(t, s, ev)
	})
}

// One precision everywhere: a period closes at its end plus the grace, to the millisecond, for the close check
// and for submissions alike (a grace of 1.5 s, which whole seconds cannot hold). A millisecond before, a late
// score counts and nothing is recorded; at that moment the check records the close and a late score is refused.
func TestCloseMomentIsTheSameForChecksAndScores(t *testing.T) {
	t.Parallel()
	const grace = 1500 * time.Millisecond
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		for _, c := range []struct {
			w      lb.Window
			end    time.Time
			period string
		}{{lb.Daily, time.Date(2031, 7, 2, 0, 0, 0, 0, time.UTC), "2031-07-01"}, {lb.Season, t0.Add(time.Hour), "s1"}} {
			t.Run(string(c.w), func(t *testing.T) {
				s, clock := clockedStore(s, tg, t0)
				b := mustBoard(t, s, lb.Board{ID: "moment-" + string(c.w), Windows: []lb.Window{c.w}, Grace: grace})
				if c.w == lb.Season {
					if _, err := s.StartSeason(ctx, b.ID, "s1", c.end); err != nil {
						t.Fatal(err)
					}
				}
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "a", Score: 1})
				closes := c.end.Add(grace)
				clock.Set(closes.Add(-time.Millisecond))
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "b", Score: 2, AchievedAt: c.end.Add(-time.Second)})
				if ids, _, err := s.RecordDueCloses(ctx, b.ID); err != nil || len(ids) != 0 {
					t.Fatalf("%s: close check a millisecond before the close: %v %v", c.w, ids, err)
				}
				clock.Set(closes)
				_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: "c", Score: 3, AchievedAt: c.end.Add(-time.Second)})
				if lb.ErrorCode(err) != lb.PeriodClosed {
					t.Fatalf("%s: a late score at end + grace: %v, want PERIOD_CLOSED", c.w, err)
				}
				if ids, _, err := s.RecordDueCloses(ctx, b.ID); err != nil || len(ids) != 1 {
					t.Fatalf("%s: close check at end + grace: %v %v, want one event", c.w, ids, err)
				}
				ev := closeEventOf(t, s, b.ID, c.w, c.period)
				if ev.Size != 2 {
					t.Fatalf("%s: event %+v, want a and b", c.w, ev)
				}
				assertFinal(t, s, ev)
			})
		}
	})
}

// The fence lives as long as the period's keys: at least as long as each of them, also for a season readable for
// centuries closed on demand (whose close mark once lived 400 days), and for a day nobody played (no event, but
// closed all the same: a late score from a lagging clock does not open it again).
func TestCloseFenceOutlivesThePeriod(t *testing.T) {
	t.Parallel()
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		lagging := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), PublishCommand: s.PublishCommand(),
			Clock: func() time.Time { return clock.Now().Add(-2 * time.Second) }})
		ttl := func(key string) time.Duration {
			t.Helper()
			d, err := tg.Client.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		outlives := func(b string, w lb.Window, p string) {
			t.Helper()
			fence := ttl(lb.FenceKey(s, b, w, p))
			for _, k := range []string{lb.StateKey(s, b, w, p), lb.RankingKey(s, b, w, p),
				lb.RecordsKey(s, b, w, p, 0)} {
				if keys := ttl(k); keys <= 0 || fence < keys {
					t.Fatalf("%s %s: fence TTL %v, key %s TTL %v", w, p, fence, k, keys)
				}
			}
		}

		long := mustBoard(t, s, lb.Board{ID: "fence-ages", Windows: []lb.Window{lb.Season}, Grace: time.Minute,
			Retention: 1000})
		if _, err := s.StartSeason(ctx, long.ID, "long", t0.Add(300*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: long.ID, Player: "p", Score: 1})
		if _, recorded, err := s.RecordClose(ctx, long.ID, lb.Season, "long", clock.Now()); err != nil || !recorded {
			t.Fatalf("RecordClose: %v %v", recorded, err)
		}
		outlives(long.ID, lb.Season, "long")

		days := mustBoard(t, s, lb.Board{ID: "fence-days", Windows: []lb.Window{lb.Daily}, Grace: time.Minute})
		mustSubmit(t, s, lb.Submission{Board: days.ID, Player: "p", Score: 1}) // 2031-07-01; nobody plays the 2nd
		clock.Set(time.Date(2031, 7, 3, 0, 1, 1, 0, time.UTC))
		if ids, _, err := s.RecordDueCloses(ctx, days.ID); err != nil || len(ids) != 1 {
			t.Fatalf("close check: %v %v, want the 1st's event", ids, err)
		}
		outlives(days.ID, lb.Daily, "2031-07-01")
		if d := ttl(lb.FenceKey(s, days.ID, lb.Daily, "2031-07-02")); d <= 0 {
			t.Fatalf("the unplayed 2nd has no fence (TTL %v)", d)
		}
		_, err := lagging.Submit(ctx, lb.Submission{Board: days.ID, Player: "q", Score: 1,
			AchievedAt: time.Date(2031, 7, 2, 23, 0, 0, 0, time.UTC)})
		if lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("a late score for the closed unplayed 2nd: %v, want PERIOD_CLOSED", err)
		}
	})
}

// The race as a load: writers whose clocks lie within 300 ms either side of the shared clock send late scores
// while the shared clock crosses end + grace and a close check runs; some writers keep sending, by their clocks
// still inside the grace, after the close is recorded. Whatever interleaving Redis sees, the close event's size
// and top are exactly the period's standings afterwards, and those are exactly the accepted scores (a model of
// them: distinct scores, DESC); the writers that lag see PERIOD_CLOSED after the close.
func TestCloseFenceUnderConcurrentLateScores(t *testing.T) {
	t.Parallel()
	const writers, each = 8, 40
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		for _, w := range []lb.Window{lb.Daily, lb.Season} {
			t.Run(string(w), func(t *testing.T) {
				end := time.Date(2031, 7, 2, 0, 0, 0, 0, time.UTC)
				period := "2031-07-01"
				var shared atomic.Int64 // ms since closes; writers move it on by 1 ms a submission
				const grace = time.Minute
				closes := end.Add(grace)
				start := t0
				if w == lb.Season {
					start, period = end.Add(-time.Hour), "s1"
				}
				now := func(skew time.Duration) func() time.Time {
					return func() time.Time { return closes.Add(time.Duration(shared.Load())*time.Millisecond + skew) }
				}
				setup := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: func() time.Time { return start }})
				b := mustBoard(t, setup, lb.Board{ID: "hammer-" + string(w), Windows: []lb.Window{w}, Grace: grace,
					CloseEventTop: lb.MaxCloseEventTop})
				if w == lb.Season {
					if _, err := setup.StartSeason(ctx, b.ID, "s1", end); err != nil {
						t.Fatal(err)
					}
				}
				shared.Store(-200) // 200 ms before end + grace
				closer := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: now(0)})
				recorded := make(chan struct{})
				done := make(chan struct{})
				var closerErr error
				go func() { // the close check, as often as it can until it records the event
					defer close(recorded)
					for {
						ids, _, err := closer.RecordDueCloses(ctx, b.ID)
						if err != nil || len(ids) > 0 {
							closerErr = err
							return
						}
						select {
						case <-done:
							closerErr = fmt.Errorf("the writers finished before the close was recorded")
							return
						default:
						}
					}
				}()
				type outcome struct {
					player string
					score  float64
					lag    bool // the writer's clock was inside the grace
					err    error
					after  bool // sent after the close was recorded
				}
				results := make([][]outcome, writers)
				var wg sync.WaitGroup
				for i := range writers {
					skew := time.Duration(-300+600*i/(writers-1)) * time.Millisecond
					st := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: now(skew)})
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range each {
							if shared.Load() >= 100 { // well past the close: wait until it is recorded
								select {
								case <-recorded:
								case <-time.After(30 * time.Second):
								}
							}
							o := outcome{player: fmt.Sprintf("w%d-%d", i, j), score: float64(1 + i*each + j)}
							select {
							case <-recorded:
								o.after = true
							default:
							}
							o.lag = st.Now().Before(closes)
							_, o.err = st.Submit(ctx, lb.Submission{Board: b.ID, Player: o.player, Score: o.score,
								AchievedAt: end.Add(-time.Second)})
							shared.Add(1)
							results[i] = append(results[i], o)
						}
					}()
				}
				wg.Wait()
				close(done)
				<-recorded
				if closerErr != nil {
					t.Fatal(closerErr)
				}
				var model []outcome
				raced, fenced := 0, 0
				for _, rs := range results {
					for _, o := range rs {
						if o.lag && o.after {
							raced++
						}
						switch {
						case o.err == nil:
							model = append(model, o)
						case lb.ErrorCode(o.err) != lb.PeriodClosed:
							t.Fatalf("%s: %v", o.player, o.err)
						case o.lag && o.after:
							fenced++
						}
					}
				}
				if raced == 0 {
					t.Fatalf("no lagging writer sent a score after the close was recorded: the race did not happen")
				}
				slices.SortFunc(model, func(a, b outcome) int { return int(b.score - a.score) })
				ev := closeEventOf(t, s, b.ID, w, period)
				assertFinal(t, s, ev)
				if int(ev.Size) != len(model) || len(ev.Top) != len(model) {
					t.Fatalf("event size %d with %d rows, %d scores accepted", ev.Size, len(ev.Top), len(model))
				}
				for k, o := range model {
					if e := ev.Top[k]; e.PlayerID != o.player || e.Score != o.score {
						t.Fatalf("event rank %d: %s %v, the model has %s %v", k+1, e.PlayerID, e.Score, o.player, o.score)
					}
				}
				if fenced != raced {
					t.Fatalf("%d of %d scores sent by lagging writers after the close were refused", fenced, raced)
				}
				t.Logf("%d scores accepted, %d refused by the fence", len(model), fenced)
			})
		}
	})
}

// Closing a period on demand (RecordClose) before its time closes it: a calendar period refuses scores from then
// on; a season stops taking them (the SEASON window is skipped, as for a season whose grace is over, and the
// submission counts for the board's other windows).
func TestRecordCloseClosesEarly(t *testing.T) {
	t.Parallel()
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		s, _ = clockedStore(s, tg, t0)
		day := mustBoard(t, s, lb.Board{ID: "early-day", Windows: []lb.Window{lb.Daily}})
		mustSubmit(t, s, lb.Submission{Board: day.ID, Player: "a", Score: 1})
		if _, _, err := s.RecordClose(ctx, day.ID, lb.Daily, "2031-07-01", t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Submit(ctx, lb.Submission{Board: day.ID, Player: "b", Score: 2}); lb.ErrorCode(err) != lb.PeriodClosed {
			t.Fatalf("a score for a day closed early: %v, want PERIOD_CLOSED", err)
		}
		assertFinal(t, s, closeEventOf(t, s, day.ID, lb.Daily, "2031-07-01"))

		league := mustBoard(t, s, lb.Board{ID: "early-league", Windows: []lb.Window{lb.Season, lb.AllTime}})
		if _, err := s.StartSeason(ctx, league.ID, "s1", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: league.ID, Player: "a", Score: 1})
		if _, _, err := s.RecordClose(ctx, league.ID, lb.Season, "s1", t0); err != nil {
			t.Fatal(err)
		}
		r := mustSubmit(t, s, lb.Submission{Board: league.ID, Player: "b", Score: 2})
		if r.Window != lb.AllTime {
			t.Fatalf("a score after the season closed early went to %s %s, want ALL_TIME only", r.Window, r.Period)
		}
		assertFinal(t, s, closeEventOf(t, s, league.ID, lb.Season, "s1"))
	})
}

// Store.Fence reads the primitive the ledger will freeze standings at: nil while a period is open; once closed,
// the outbox id of its close event (empty for a period closed without one) and a lifetime at least that of the
// period's keys. Bad arguments are BAD_USER_INPUT, an unknown board NOT_FOUND.
func TestFenceReadsTheClose(t *testing.T) {
	t.Parallel()
	eachFenceTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		s, clock := clockedStore(s, tg, time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC))
		b := mustBoard(t, s, lb.Board{ID: "fence-read", Windows: []lb.Window{lb.Daily}, Grace: time.Minute})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p", Score: 1})
		if f, err := s.Fence(ctx, b.ID, lb.Daily, "2031-07-01"); err != nil || f != nil {
			t.Fatalf("the open day: %+v %v, want no fence", f, err)
		}
		clock.Set(time.Date(2031, 7, 3, 0, 1, 0, 0, time.UTC))
		if _, _, err := s.RecordDueCloses(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		ev := closeEventOf(t, s, b.ID, lb.Daily, "2031-07-01")
		f, err := s.Fence(ctx, b.ID, lb.Daily, "2031-07-01")
		if err != nil {
			t.Fatal(err)
		}
		keys, err := tg.Client.PTTL(ctx, lb.RankingKey(s, b.ID, lb.Daily, "2031-07-01")).Result() // read after
		if err != nil || f == nil || f.OutboxID != ev.OutboxID || f.ExpiresIn < keys {
			t.Fatalf("the closed 1st: %+v %v, want event %s and at least %v", f, err, ev.OutboxID, keys)
		}
		if f, err := s.Fence(ctx, b.ID, lb.Daily, "2031-07-02"); err != nil || f == nil || f.OutboxID != "" ||
			f.ExpiresIn <= 0 {
			t.Fatalf("the closed unplayed 2nd: %+v %v, want a fence without event", f, err)
		}
		for _, c := range []struct {
			board, period string
			w             lb.Window
			code          lb.Code
		}{{b.ID, "", lb.Daily, lb.Invalid}, {b.ID, "x", "HOURLY", lb.Invalid}, {"nope", "2031-07-01", lb.Daily, lb.NotFound}} {
			if _, err := s.Fence(ctx, c.board, c.w, c.period); lb.ErrorCode(err) != c.code {
				t.Errorf("Fence(%q, %s, %q): %v, want %s", c.board, c.w, c.period, err, c.code)
			}
		}
	})
}

// A season started by a server of a version before the grace was kept in milliseconds (its state has the grace
// in whole seconds only) closes at its end plus that grace, as the close check sees it: a late score a
// millisecond before counts, one at that moment does not.
func TestSeasonStartedWithGraceInSecondsOnly(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 7, 1, 12, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		b := mustBoard(t, s, lb.Board{ID: "old-season", Windows: []lb.Window{lb.Season, lb.AllTime}, Grace: time.Minute})
		end := t0.Add(time.Hour)
		if _, err := s.StartSeason(ctx, b.ID, "s1", end); err != nil {
			t.Fatal(err)
		}
		if n, err := tg.Client.HDel(ctx, lb.SeasonStateKey(s, b.ID), "gms").Result(); err != nil || n != 1 {
			t.Fatalf("HDEL gms: %d %v", n, err)
		}
		clock.Set(end.Add(time.Minute - time.Millisecond))
		if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "a", Score: 1, AchievedAt: end.Add(-time.Second)}); r.Window != lb.Season {
			t.Fatalf("a late score in the last millisecond of the grace went to %s %s", r.Window, r.Period)
		}
		clock.Set(end.Add(time.Minute))
		if r := mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "b", Score: 1, AchievedAt: end.Add(-time.Second)}); r.Window != lb.AllTime {
			t.Fatalf("a late score at end + grace went to %s %s", r.Window, r.Period)
		}
	})
}
