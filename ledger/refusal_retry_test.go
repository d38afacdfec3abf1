package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// refuseHeldLedger is a ledger whose Refuse waits for release (a slow mark), and that tells (dup) when an Append
// answered eventID as a duplicate of an event it holds.
type refuseHeldLedger struct {
	leaderboard.Ledger
	eventID            string
	refusing, release  chan struct{}
	dup                chan struct{}
	onceRefuse, oneDup sync.Once
}

func (l *refuseHeldLedger) Refuse(ctx context.Context, board string, recorded time.Time,
	refusals []leaderboard.Refusal) error {
	l.onceRefuse.Do(func() { close(l.refusing) })
	<-l.release
	return l.Ledger.Refuse(ctx, board, recorded, refusals)
}

func (l *refuseHeldLedger) Append(ctx context.Context, batches []leaderboard.AppendBatch) ([][]leaderboard.Appended,
	error) {
	res, err := l.Ledger.Append(ctx, batches)
	for i, b := range batches {
		for k, e := range b.Events {
			if err == nil && e.EventID == l.eventID && res[i][k].Duplicate {
				l.oneDup.Do(func() { close(l.dup) })
			}
		}
	}
	return res, err
}

// A retry sent before its submission's refusal was answered: the ledger still holds the eventId (its refusal is
// marked, and the eventId freed, just before the answer), so the retry is the same event again. It must answer the
// refusal the first attempt got, and change nothing; before, it answered duplicate: true with the player's entry,
// a submission that never counted said to have counted. A retry after the answer is a new attempt, refused again
// while the total would still leave the range. Unsharded and sharded.
func TestRetryBeforeTheRefusalsAnswer(t *testing.T) {
	pg := pgtest.Shared(t)
	rdb := redistest.Standalone(t).Client(t)
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			l := &refuseHeldLedger{Ledger: openLedger(t, pg.Database(t)), eventID: "over",
				refusing: make(chan struct{}), release: make(chan struct{}), dup: make(chan struct{})}
			s := newStore(rdb, l, newClock())
			board := fmt.Sprintf("refused%d", shards)
			maxScore := 10.0
			if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: board, Mode: leaderboard.Sum, MaxScore: &maxScore,
				Shards: shards}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Submit(ctx, leaderboard.Submission{Board: board, Player: "ann", Score: 8, EventID: "base"}); err != nil {
				t.Fatal(err)
			}
			over := leaderboard.Submission{Board: board, Player: "ann", Score: 5, EventID: "over"} // 13 > 10
			type answer struct {
				r   *leaderboard.Result
				err error
			}
			send := func() <-chan answer {
				ch := make(chan answer, 1)
				go func() {
					r, err := s.Submit(ctx, over)
					ch <- answer{r, err}
				}()
				return ch
			}
			first := send()
			<-l.refusing // Redis refused it; its mark waits
			retry := send()
			select {
			case <-l.dup: // the ledger took the retry for the same event
			case <-ctx.Done():
				t.Fatal("the retry was not recorded as a duplicate")
			}
			close(l.release)
			for name, ch := range map[string]<-chan answer{"first": first, "retry": retry} {
				a := <-ch
				if leaderboard.ErrorCode(a.err) != leaderboard.Invalid || a.r != nil {
					t.Errorf("%s attempt: %+v, %v; want the refusal (BAD_USER_INPUT: the total would leave the range)",
						name, a.r, a.err)
				}
			}
			if r, err := s.Submit(ctx, over); leaderboard.ErrorCode(err) != leaderboard.Invalid {
				t.Errorf("a retry after the answer: %+v, %v; want the refusal again", r, err)
			}
			en, err := s.Rank(ctx, leaderboard.View{Board: board, Window: leaderboard.AllTime}, "ann")
			if err != nil || en == nil || en.Score != 8 {
				t.Fatalf("ann after the refusals: %+v, %v; want 8", en, err)
			}
			evs, _, err := s.ScoreEvents(ctx, board, "ann", 10, "")
			if err != nil {
				t.Fatal(err)
			}
			var counting, refused int
			for _, e := range evs {
				if e.Voided {
					refused++
				} else {
					counting++
				}
			}
			if counting != 1 || refused != 2 {
				t.Fatalf("ann's events: %d counting, %d refused; want 1 (base) and 2 (the first attempt and the new "+
					"one after the answer): %+v", counting, refused, evs)
			}
		})
	}
}
