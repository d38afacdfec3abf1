package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// modelPeriod is the model's view of one period of one window: who scored in it and when it ended.
type modelPeriod struct {
	key     string
	end     time.Time
	players map[string]bool
}

// TestPeriodsModel: with an injected clock moved forward in uneven steps over about ten weeks (across day, ISO
// week and month boundaries and a daylight-saving change in Europe/Berlin), players scoring at random (also late,
// inside the grace window, into a period that has just closed), Periods lists for every window exactly the closed
// periods of a model: the periods that received a score, computed with the independent period oracle, kept until
// the end of the Retention periods after them plus the grace, newest first, with their number of players and end.
// ALL_TIME has none; a window the board lacks is BAD_USER_INPUT.
func TestPeriodsModel(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		loc, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		o := periodOracle{loc}
		clock := &testClock{}
		clock.Set(time.Date(2031, 2, 20, 9, 0, 0, 0, loc))
		s = lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), Clock: clock.Now})
		const retention, grace = 2, time.Hour
		wins := []lb.Window{lb.Daily, lb.AllTime, lb.Weekly, lb.Monthly}
		mustBoard(t, s, lb.Board{ID: "seasons", Windows: wins, TimeZone: "Europe/Berlin", Retention: retention,
			Grace: grace})
		model := map[lb.Window]map[string]*modelPeriod{}
		for _, w := range wins {
			model[w] = map[string]*modelPeriod{}
		}
		rnd := rand.New(rand.NewPCG(7, 9))
		check := func(step int) {
			now := clock.Now()
			for _, w := range wins {
				got, err := s.Periods(ctx, "seasons", w)
				if err != nil {
					t.Fatal(err)
				}
				var want []lb.ClosedPeriod
				for _, p := range model[w] {
					if w == lb.AllTime || now.Before(p.end) {
						continue // still open
					}
					exp := p.end
					for range retention {
						exp = o.end(w, exp)
					}
					if !now.Before(exp.Add(grace)) {
						continue // past its retention
					}
					want = append(want, lb.ClosedPeriod{Period: p.key, Size: int64(len(p.players)), EndedAt: p.end})
				}
				slices.SortFunc(want, func(a, b lb.ClosedPeriod) int { return b.EndedAt.Compare(a.EndedAt) })
				if len(got) != len(want) {
					t.Fatalf("step %d at %v, %s: Periods = %+v, model %+v", step, now, w, got, want)
				}
				for i := range got {
					if got[i].Period != want[i].Period || got[i].Size != want[i].Size ||
						!got[i].EndedAt.Equal(want[i].EndedAt) {
						t.Fatalf("step %d at %v, %s: Periods = %+v, model %+v", step, now, w, got, want)
					}
				}
			}
		}
		for step := range 90 {
			clock.Set(clock.Now().Add(time.Duration(3+rnd.IntN(30)) * time.Hour))
			now := clock.Now()
			for range rnd.IntN(4) {
				at := now
				if rnd.IntN(3) == 0 {
					at = now.Add(-time.Duration(rnd.IntN(50)) * time.Minute) // perhaps in the period just closed
				}
				player := fmt.Sprintf("p%d", rnd.IntN(8))
				mustSubmit(t, s, lb.Submission{Board: "seasons", Player: player, Score: float64(rnd.IntN(100)),
					AchievedAt: at})
				for _, w := range wins {
					k := o.key(w, at)
					p := model[w][k]
					if p == nil {
						p = &modelPeriod{key: k, players: map[string]bool{}}
						if w != lb.AllTime { // never ends
							p.end = o.end(w, at)
						}
						model[w][k] = p
					}
					p.players[player] = true
				}
			}
			check(step)
		}
		if ps, err := s.Periods(ctx, "seasons", lb.Monthly); err != nil || len(ps) == 0 {
			t.Fatalf("no closed month listed at the end: %+v, %v", ps, err)
		}
		mustBoard(t, s, lb.Board{ID: "daily-only", Windows: []lb.Window{lb.Daily}})
		if _, err := s.Periods(ctx, "daily-only", lb.Weekly); lb.ErrorCode(err) != lb.Invalid {
			t.Fatalf("Periods of a window the board lacks: %v, want BAD_USER_INPUT", err)
		}
		if _, err := s.Periods(ctx, "nope", lb.Daily); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Periods of an unknown board: %v, want NOT_FOUND", err)
		}
	})
}
