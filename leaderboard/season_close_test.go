package leaderboard_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// A season records one close event once its grace has passed after it ended, however it ended: closed early by
// the next startSeason, by its endsAt, or by endSeason. The event names the SEASON window and the season's id, its
// end, its size and its first closeEventTop ranks (a late score inside the grace included), as a model ranks them
// and as `top` of the closed season lists them; no event inside the grace, none twice, none from a second store.
// Leaderboard.periods(window: SEASON) lists the ended seasons.
func TestSeasonCloseEvents(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 5, 4, 18, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		other := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
		b := mustBoard(t, s, lb.Board{ID: "league", Windows: []lb.Window{lb.AllTime, lb.Season},
			Grace: time.Minute, CloseEventTop: 2, Retention: 3})
		due := func(st *lb.Store) []string {
			t.Helper()
			ids, next, err := st.RecordDueCloses(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if next.IsZero() || next.After(clock.Now().Add(time.Minute)) {
				t.Fatalf("next check %v at %v: a season board is checked at least every minute", next, clock.Now())
			}
			return ids
		}
		// check reads the newest close event and compares it with the model and with `top` of the season.
		check := func(id, season string, ended time.Time, size int64, top []string) {
			t.Helper()
			evs, err := s.Closes(ctx, b.ID, "0-0", 100)
			if err != nil || len(evs) == 0 || evs[len(evs)-1].OutboxID != id {
				t.Fatalf("outbox %+v %v, want newest %s", evs, err, id)
			}
			ev := evs[len(evs)-1]
			if ev.Board != b.ID || ev.Window != lb.Season || ev.Period != season || ev.Size != size ||
				!ev.EndedAt.Equal(ended) || len(ev.Top) != len(top) {
				t.Fatalf("event %+v, want %s ended %v size %d top %v", ev, season, ended, size, top)
			}
			page, err := s.Top(ctx, lb.View{Board: b.ID, Window: lb.Season, Period: season}, 0, len(top))
			if err != nil || page.Size != size {
				t.Fatalf("top of %s: %+v %v", season, page, err)
			}
			for i, e := range ev.Top {
				p := page.Entries[i]
				if e.PlayerID != top[i] || e.Rank != int64(i+1) || e.PlayerID != p.PlayerID || e.Score != p.Score ||
					e.Rank != p.Rank || e.TieRank != p.TieRank || e.TopPercent != p.TopPercent || !e.UpdatedAt.Equal(p.UpdatedAt) {
					t.Fatalf("event row %d %+v, want %s (top lists %+v)", i, e, top[i], p)
				}
			}
		}
		if ids := due(s); len(ids) != 0 {
			t.Fatalf("before any season: %v", ids)
		}

		// s1, closed early by s2 ten minutes in; a late score inside the grace still counts for it.
		if _, err := s.StartSeason(ctx, b.ID, "s1", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			id    string
			score float64
		}{{"p1", 10}, {"p2", 30}, {"p3", 20}} {
			mustSubmit(t, s, lb.Submission{Board: b.ID, Player: p.id, Score: p.score})
		}
		clock.Set(t0.Add(10 * time.Minute))
		if _, err := s.StartSeason(ctx, b.ID, "s2", t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p4", Score: 50}) // s2
		clock.Set(t0.Add(10*time.Minute + 30*time.Second))
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p5", Score: 40,
			AchievedAt: t0.Add(9 * time.Minute)}) // s1, late
		if ids := due(s); len(ids) != 0 {
			t.Fatalf("recorded inside s1's grace: %v", ids)
		}
		clock.Set(t0.Add(11 * time.Minute))
		ids := due(s)
		if len(ids) != 1 {
			t.Fatalf("after s1's grace: %v, want one event", ids)
		}
		check(ids[0], "s1", t0.Add(10*time.Minute), 4, []string{"p5", "p2"})
		if again, o := due(s), due(other); len(again)+len(o) != 0 {
			t.Fatalf("s1 recorded again: %v %v", again, o)
		}

		// s2 ends by its endsAt.
		clock.Set(t0.Add(2*time.Hour + 30*time.Second))
		if ids := due(s); len(ids) != 0 {
			t.Fatalf("recorded inside s2's grace: %v", ids)
		}
		clock.Set(t0.Add(2*time.Hour + time.Minute))
		ids = due(other)
		if len(ids) != 1 {
			t.Fatalf("after s2's grace: %v, want one event", ids)
		}
		check(ids[0], "s2", t0.Add(2*time.Hour), 1, []string{"p4"})

		// s3 ends by endSeason.
		if _, err := s.StartSeason(ctx, b.ID, "s3", t0.Add(5*time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p6", Score: 7})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p7", Score: 7})
		// Leaderboard.periods(window: SEASON): the ended seasons, the latest first; not the running one.
		ps, err := s.Periods(ctx, b.ID, lb.Season)
		want := []lb.ClosedPeriod{{Period: "s2", Size: 1, EndedAt: t0.Add(2 * time.Hour)},
			{Period: "s1", Size: 4, EndedAt: t0.Add(10 * time.Minute)}}
		if err != nil || len(ps) != len(want) {
			t.Fatalf("periods %+v %v, want %+v", ps, err, want)
		}
		for i := range want {
			if ps[i].Period != want[i].Period || ps[i].Size != want[i].Size || !ps[i].EndedAt.Equal(want[i].EndedAt) {
				t.Fatalf("periods %+v, want %+v", ps, want)
			}
		}
		clock.Set(t0.Add(2*time.Hour + 3*time.Minute))
		if _, err := s.EndSeason(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		clock.Set(t0.Add(2*time.Hour + 4*time.Minute))
		ids = due(s)
		if len(ids) != 1 {
			t.Fatalf("after s3's grace: %v, want one event", ids)
		}
		check(ids[0], "s3", t0.Add(2*time.Hour+3*time.Minute), 2, []string{"p6", "p7"})
		if again := due(s); len(again) != 0 {
			t.Fatalf("recorded again: %v", again)
		}
	})
}

// A season readable for centuries (retention 1000 of a 300-day season) records its close event once: the close
// mark's lifetime, beyond what time.Duration holds, once wrapped to a negative value and the mark expired at once.
func TestSeasonCloseLongRetention(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		b := mustBoard(t, s, lb.Board{ID: "ages", Windows: []lb.Window{lb.Season}, Grace: time.Minute,
			Retention: 1000})
		if _, err := s.StartSeason(ctx, b.ID, "long", t0.Add(300*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "p1", Score: 1})
		if _, err := s.EndSeason(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		var all []string
		for i := 1; i <= 3; i++ {
			clock.Set(t0.Add(time.Duration(i) * 2 * time.Minute))
			ids, _, err := s.RecordDueCloses(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ids...)
		}
		if len(all) != 1 {
			t.Fatalf("recorded %v, want one event", all)
		}
		// The mark lives as long as the season stays readable (Redis's clock, not the store's: a mark that
		// expired after a second let the next check record the event again).
		ttl, err := tg.Client.TTL(ctx, lb.FenceKey(s, b.ID, lb.Season, "long")).Result()
		if err != nil || ttl < 300*24*time.Hour {
			t.Fatalf("close mark TTL %v %v, want the season's readable life", ttl, err)
		}
	})
}

// The season registry (which Seasons and every close check read) keeps only the seasons still readable: a season
// whose keys expired leaves it at the next start, and its id still cannot be used again.
func TestSeasonRegistryKeepsReadableSeasons(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		t0 := time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC)
		s, clock := clockedStore(s, tg, t0)
		b := mustBoard(t, s, lb.Board{ID: "short", Windows: []lb.Window{lb.Season}, Grace: time.Minute, Retention: 1})
		start := func(id string, d time.Duration) {
			t.Helper()
			if _, err := s.StartSeason(ctx, b.ID, id, clock.Now().Add(d)); err != nil {
				t.Fatalf("start %s: %v", id, err)
			}
		}
		start("s1", time.Hour) // readable until its end + grace + 1 hour
		clock.Set(t0.Add(time.Hour))
		start("s2", 10*time.Hour)
		clock.Set(t0.Add(3 * time.Hour)) // s1's keys have expired
		start("s3", time.Hour)
		ids, err := tg.Client.HKeys(ctx, lb.SeasonRegistryKey(s, b.ID)).Result()
		if err != nil || len(ids) != 2 || !slices.Contains(ids, "s2") || !slices.Contains(ids, "s3") {
			t.Fatalf("registry %v %v, want s2 and s3", ids, err)
		}
		seasons, err := s.Seasons(ctx, b.ID)
		if err != nil || len(seasons) != 2 || seasons[0].ID != "s2" || seasons[1].ID != "s3" {
			t.Fatalf("seasons %+v %v", seasons, err)
		}
		clock.Set(t0.Add(4 * time.Hour))
		if _, err := s.StartSeason(ctx, b.ID, "s1", clock.Now().Add(time.Hour)); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("starting s1 again: %v, want CONFLICT", err)
		}
	})
}
