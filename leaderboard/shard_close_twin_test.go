package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedTwinCloseEvents: a DAILY period of a LATEST board with heavy ties over every shard (scores dropped
// and raised, same-score resubmissions that keep the place, names and metadata changed, late scores inside the
// grace on the next day) closes on its own (RecordDueCloses past the grace) on the unsharded board and its sharded
// twins. Each twin's periodClosed event is the unsharded board's, field by field (rank, tieRank, score, name,
// metadata, updatedAt), with its size; the unsharded event is a model's final standings of the day (ties by first
// arrival). Afterwards a late score for that day is PERIOD_CLOSED on every board for players of every shard, known
// or new, also from a store whose clock lags inside the grace (only the fence refuses it there), and nothing
// enters the period.
func TestShardedTwinCloseEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := twinStore(t)
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clock.Set(day.Add(23*time.Hour + 30*time.Minute))
	def := lb.Board{ID: "close-twins", Mode: lb.Latest, Windows: []lb.Window{lb.Daily}, Grace: 5 * time.Minute,
		CloseEventTop: 30}
	tw := newTwins(t, s, clock, def)
	players := twinPlayers(40)
	period := day.Format("2006-01-02")

	type row struct {
		score   float64
		arrival int
		name    string
		meta    string
	}
	model := map[string]*row{}
	arrivals := 0
	send := func(p string, score float64, name, meta string, late time.Time) {
		t.Helper()
		clock.Set(clock.Now().Add(time.Second))
		sub := lb.Submission{Player: p, Score: score, AchievedAt: late}
		if name != "" {
			sub.DisplayName = ptr(name)
		}
		if meta != "" {
			sub.Metadata = json.RawMessage(meta)
		}
		tw.submit(sub)
		r := model[p]
		if r == nil {
			r = &row{}
			model[p] = r
		}
		if r.arrival == 0 || r.score != score { // LATEST: a changed score is a new arrival
			arrivals++
			r.arrival = arrivals
		}
		r.score = score
		if name != "" {
			r.name = name
		}
		if meta != "" {
			r.meta = meta
		}
	}
	for i, p := range players {
		send(p, float64(i%4), fmt.Sprintf("n%d", i), fmt.Sprintf(`{"i":%d}`, i), time.Time{})
	}
	for i, p := range players {
		switch i % 5 {
		case 0: // the same score, a new name: keeps its place
			send(p, float64(i%4), fmt.Sprintf("m%d", i), "", time.Time{})
		case 1: // up into the best tie, arriving last there
			send(p, 3, "", `{"up":true}`, time.Time{})
		case 2: // down
			send(p, 0, "", "", time.Time{})
		}
	}
	// The next day, inside the grace: late scores of the day before, and the new day's own.
	clock.Set(day.Add(24*time.Hour + 2*time.Minute))
	for i, p := range players[:12] {
		if i%3 == 0 {
			send(p, 3, "late", "", day.Add(23*time.Hour+59*time.Minute))
		}
	}
	clock.Set(clock.Now().Add(time.Second))
	tw.submit(lb.Submission{Player: players[1], Score: 99}) // the new day's: in no event of the day before

	// The model's final standings of the day: score descending, then first arrival.
	order := slices.Collect(func(yield func(string) bool) {
		for p := range model {
			if !yield(p) {
				return
			}
		}
	})
	slices.SortFunc(order, func(a, b string) int {
		if model[a].score != model[b].score {
			if model[a].score > model[b].score {
				return -1
			}
			return 1
		}
		return model[a].arrival - model[b].arrival
	})

	clock.Set(day.Add(24*time.Hour + 6*time.Minute)) // past the grace
	var want *lb.CloseEvent
	for i, id := range tw.ids {
		rec, _, err := s.RecordDueCloses(ctx, id)
		if err != nil || len(rec) != 1 {
			t.Fatalf("RecordDueCloses on %d shards: %v, %v; want one event", tw.shards[i], rec, err)
		}
		evs, err := s.Closes(ctx, id, "0", 10)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Closes on %d shards: %+v, %v", tw.shards[i], evs, err)
		}
		ev := evs[0]
		if ev.Window != lb.Daily || ev.Period != period || !ev.EndedAt.Equal(day.Add(24*time.Hour)) ||
			ev.Size != int64(len(players)) || len(ev.Top) != 30 {
			t.Fatalf("close event on %d shards: %s %s ended %v size %d, %d rows", tw.shards[i], ev.Window, ev.Period,
				ev.EndedAt, ev.Size, len(ev.Top))
		}
		if i == 0 {
			want = &ev
			var tie int64
			for k, e := range ev.Top {
				r := model[order[k]]
				if k == 0 || e.Score != ev.Top[k-1].Score {
					tie = int64(k + 1)
				}
				if e.PlayerID != order[k] || e.Rank != int64(k+1) || e.TieRank != tie || e.Score != r.score ||
					strp(e.DisplayName) != strp(&r.name) || string(e.Metadata) != r.meta {
					t.Fatalf("unsharded event row %d: %q rank %d tieRank %d score %v name %q metadata %s; the model "+
						"has %q rank %d tieRank %d %+v", k, e.PlayerID, e.Rank, e.TieRank, e.Score, strp(e.DisplayName),
						e.Metadata, order[k], k+1, tie, *r)
				}
			}
			continue
		}
		if d := tw.entriesDiff(ev.Top, want.Top, want.Size); d != "" {
			t.Fatalf("close event on %d shards: %s", tw.shards[i], d)
		}
	}

	// After the close: late scores of that day are refused everywhere, by the grace, and by the fence alone
	// from a store whose clock still says the grace runs.
	lagging := lb.New(shardClient(t), lb.Config{Prefix: s.Prefix(),
		Clock: func() time.Time { return day.Add(24*time.Hour + 4*time.Minute) }})
	late := day.Add(23 * time.Hour)
	for _, st := range []*lb.Store{s, lagging} {
		for k := range 70 {
			p := fmt.Sprintf("new%d", k)
			if k < len(players) {
				p = players[k]
			}
			for i, id := range tw.ids {
				_, err := st.Submit(ctx, lb.Submission{Board: id, Player: p, Score: 50, AchievedAt: late})
				if lb.ErrorCode(err) != lb.PeriodClosed {
					t.Fatalf("a late score for %s (shard %d of %d) after the close: %v, want PERIOD_CLOSED", p,
						lb.ShardOf(p, tw.shards[i]), tw.shards[i], err)
				}
			}
		}
	}
	for i, id := range tw.ids {
		n, err := s.Size(ctx, lb.View{Board: id, Window: lb.Daily, Period: period})
		if err != nil || n != int64(len(players)) {
			t.Fatalf("the closed day on %d shards: size %d, %v", tw.shards[i], n, err)
		}
	}
}
