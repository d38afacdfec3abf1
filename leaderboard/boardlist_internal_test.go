package leaderboard

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The hub's Redis reader forgets a deleted board (Store.Forget) on its deletion notice and must not wait for
// Redis: a read of the board lists running on a stalled Redis used to hold the list's lock through its round
// trip, so the reader (and every board's notices behind it) waited for it. Forget now returns while the read is
// stuck, and the read, once Redis answers, leaves out the board forgotten meanwhile and keeps the one created.
func TestForgetDoesNotWaitForTheBoardListRead(t *testing.T) {
	t.Parallel()
	s, stall := stalledRedis(t, Config{})
	ctx := context.Background()
	for _, id := range []string{"kept", "gone"} {
		if _, err := s.CreateBoard(ctx, Board{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	s.listMu.Lock()
	s.listRead = time.Time{} // the next read goes to Redis
	s.listMu.Unlock()

	const pause = 5 * time.Second
	stall(pause)
	read := make(chan []string, 1)
	go func() {
		ids, err := s.boardIDs(ctx)
		if err != nil {
			t.Error(err)
		}
		read <- ids
	}()
	deadline := time.Now().Add(pause / 2)
	for {
		s.listMu.Lock()
		filling := s.listFilling
		s.listMu.Unlock()
		if filling {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read of the board lists did not begin")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	s.Forget("gone")
	if took := time.Since(start); took > pause/4 {
		t.Fatalf("Forget took %s while a read of the board lists waited on a stalled Redis (paused %s)", took, pause)
	}
	select {
	case ids := <-read:
		t.Fatalf("the read of the board lists ended before Redis answered: %v", ids)
	default:
	}
	ids := <-read
	if !slices.Equal(ids, []string{"kept"}) {
		t.Errorf("board list read across the forget = %v, want [kept] (Redis still lists gone: the forget applies)", ids)
	}
	if again, err := s.boardIDs(ctx); err != nil || !slices.Equal(again, []string{"kept"}) {
		t.Errorf("cached board list = %v, %v; want [kept]", again, err)
	}
}
