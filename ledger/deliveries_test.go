package ledger_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The deliveries of close events (close_deliveries): Freeze opens one per consumer group, Delivered completes it
// (delivered or given up; the first outcome stays), and Undelivered returns only the announced versions with an
// open delivery to one of the groups asked about, oldest announcement first: of a board with 300 closes, the two
// whose delivery did not complete, not its history.
func TestUndeliveredReadsOpenDeliveries(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 60*time.Second)
	l := openLedger(t, pgtest.Shared(t).Database(t))
	s := newStore(redistest.Standalone(t).Client(t), l, newClock())
	const board = "hist"
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: board, Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	lb, ok, err := l.Board(ctx, board)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	groups := []string{"wh:1", "wh:2"}
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	period := func(i int) string { return day.AddDate(0, 0, i).Format("2006-01-02") }
	rows := []leaderboard.Entry{{Rank: 1, TieRank: 1, PlayerID: "p", Score: 1, UpdatedAt: day}}
	for i := range 300 {
		fp := leaderboard.FrozenPeriod{Window: leaderboard.Daily, Period: period(i), Version: 1,
			EndedAt: day.AddDate(0, 0, i+1), FrozenAt: day.AddDate(0, 0, i+1), Size: 1, Rows: 1}
		if created, err := l.Freeze(ctx, lb.Key, fp, rows, groups); err != nil || !created {
			t.Fatal(created, err)
		}
		if i == 7 {
			continue // frozen, not announced yet: the close check sends it, not a re-send
		}
		at := fp.FrozenAt.Add(time.Minute)
		if err := l.Announced(ctx, lb.Key, fp.Window, fp.Period, 1, fmt.Sprintf("%d-0", i+1), at); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 120: // open for both
		case 50: // open for wh:2
			if err := l.Delivered(ctx, board, fp.Window, fp.Period, 1, "wh:1", false, at); err != nil {
				t.Fatal(err)
			}
		default:
			if err := l.Delivered(ctx, board, fp.Window, fp.Period, 1, "wh:1", false, at); err != nil {
				t.Fatal(err)
			}
			if err := l.Delivered(ctx, board, fp.Window, fp.Period, 1, "wh:2", i%2 == 0, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := func(gs []string) []string {
		t.Helper()
		us, err := l.Undelivered(ctx, lb.Key, 0, gs, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range us {
			if u.Board != board || u.Key != lb.Key || u.AnnouncedAt.IsZero() || u.OutboxID == "" {
				t.Errorf("undelivered %+v", u)
			}
			out = append(out, u.Period+"@"+u.OutboxID)
		}
		return out
	}
	if got, want := open(groups), []string{period(50) + "@51-0", period(120) + "@121-0"}; !slices.Equal(got, want) {
		t.Fatalf("open deliveries %v, want %v", got, want)
	}
	if got, want := open([]string{"wh:1"}), []string{period(120) + "@121-0"}; !slices.Equal(got, want) {
		t.Fatalf("open deliveries of wh:1 %v, want %v", got, want)
	}
	if got := open([]string{"wh:3"}); len(got) != 0 { // a URL added after the closes: no history
		t.Fatalf("open deliveries of a group added later: %v", got)
	}
	// The first outcome stays; DeliveryDone reads it.
	p50 := period(50)
	if done, err := l.DeliveryDone(ctx, board, leaderboard.Daily, p50, 1, "wh:2"); err != nil || done {
		t.Fatal(done, err)
	}
	if err := l.Delivered(ctx, board, leaderboard.Daily, p50, 1, "wh:2", false, day); err != nil {
		t.Fatal(err)
	}
	if err := l.Delivered(ctx, board, leaderboard.Daily, p50, 1, "wh:2", true, day); err != nil {
		t.Fatal(err)
	}
	var outcome string
	if err := l.Pool().QueryRow(ctx, `SELECT outcome FROM close_deliveries WHERE board_key = $1 AND period = $2
		AND grp = 'wh:2'`, lb.Key, p50).Scan(&outcome); err != nil || outcome != "delivered" {
		t.Fatalf("outcome %q (%v), want delivered", outcome, err)
	}
	if done, err := l.DeliveryDone(ctx, board, leaderboard.Daily, p50, 1, "wh:2"); err != nil || !done {
		t.Fatal(done, err)
	}
	if got, want := open(groups), []string{period(120) + "@121-0"}; !slices.Equal(got, want) {
		t.Fatalf("open deliveries %v, want %v", got, want)
	}
	// Every board (key 0) finds it too; a deleted board's are gone.
	all, err := l.Undelivered(ctx, 0, 0, groups, 100)
	if err != nil || len(all) != 1 || all[0].Period != period(120) {
		t.Fatalf("undelivered of every board: %+v, %v", all, err)
	}
	if after, err := l.Undelivered(ctx, 0, lb.Key, groups, 100); err != nil || len(after) != 0 {
		t.Fatalf("undelivered of the boards after this one: %+v, %v", after, err)
	}
	if _, err := s.DeleteBoard(ctx, board); err != nil {
		t.Fatal(err)
	}
	if all, err := l.Undelivered(ctx, 0, 0, groups, 100); err != nil || len(all) != 0 {
		t.Fatalf("undelivered after the board's deletion: %+v, %v", all, err)
	}
}
