package periodclose

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestMain stops the shared redis-server processes after the package's tests.
func TestMain(m *testing.M) { redistest.Main(m) }

// The close checker remembers when each board's next close is due for the definition it saw: a MONTHLY board
// deleted and created again with a SEASON window is checked afresh, not a month later, so its season's close is
// recorded once the grace has passed.
func TestCloseCheckerForgetsDeletedDefinition(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2032, 6, 10, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	st := leaderboard.New(redistest.SharedStandalone(t).Client(t), leaderboard.Config{Prefix: redistest.Prefix(t),
		Clock: clock})
	c := &closeChecker{store: st, every: time.Second, log: slog.Default(),
		metrics: Metrics{}.withDefaults(), due: map[string]closeDue{}}
	if _, err := st.CreateBoard(ctx, leaderboard.Board{ID: "cup", Windows: []leaderboard.Window{leaderboard.Monthly}}); err != nil {
		t.Fatal(err)
	}
	c.pass(ctx) // due at July 1st plus the grace
	if ok, err := st.DeleteBoard(ctx, "cup"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := st.CreateBoard(ctx, leaderboard.Board{ID: "cup", Grace: time.Minute,
		Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Season}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartSeason(ctx, "cup", "june", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Submit(ctx, leaderboard.Submission{Board: "cup", Player: "p1", Score: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EndSeason(ctx, "cup"); err != nil {
		t.Fatal(err)
	}
	set(now.Add(2 * time.Minute))
	c.pass(ctx)
	evs, err := st.Closes(ctx, "cup", "0-0", 10)
	if err != nil || len(evs) != 1 || evs[0].Window != leaderboard.Season || evs[0].Period != "june" {
		t.Fatalf("close events %+v %v, want june's", evs, err)
	}
}
