package leaderboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// review.go: fraud review with the ledger. scoreEvents lists a player's submissions as the ledger keeps them;
// voidScoreEvents voids some, rebuilds the board from the events that still count and corrects the frozen
// standings of the closed periods they changed (freeze.go).

// Limits of the ledger's reads and voids.
const (
	MaxScoreEvents = 1000 // ScoreEvents: largest page
	MaxVoidIDs     = 1000 // VoidScoreEvents: most eventIds in one call
	MaxVoidReason  = 1024 // VoidScoreEvents: bytes of the reason
)

// ScoreEvents returns up to first of a player's submissions on a board as the ledger keeps them, oldest first,
// after the cursor after ("": from the first); next is the cursor of the page after ("": none).
func (s *Store) ScoreEvents(ctx context.Context, board, player string, first int, after string) (
	evs []LedgerEvent, next string, err error) {
	if s.seq == nil {
		return nil, "", errorf(Invalid, "scoreEvents needs the ledger (DATABASE_URL)")
	}
	if err := checkID("board id", board); err != nil {
		return nil, "", err
	}
	if err := checkID("player id", player); err != nil {
		return nil, "", err
	}
	if first < 1 || first > MaxScoreEvents {
		return nil, "", errorf(Invalid, "first must be 1 to %d", MaxScoreEvents)
	}
	var from int64
	if after != "" {
		if from, err = strconv.ParseInt(after, 10, 64); err != nil || from < 0 {
			return nil, "", errorf(Invalid, "after must be a cursor from an earlier page")
		}
	}
	lb, ok, err := s.seq.ledger.Board(ctx, board)
	if err != nil {
		return nil, "", err
	}
	if !ok { // a board Redis holds from before the ledger has no record: BAD_USER_INPUT (ledgerError)
		return nil, "", s.ledgerError(ctx, board, errorf(NotFound, "no leaderboard with id %q", board))
	}
	evs, err = s.seq.ledger.PlayerEvents(ctx, lb.Key, player, from, first+1)
	if err != nil {
		return nil, "", err
	}
	if len(evs) > first {
		evs = evs[:first]
		next = strconv.FormatInt(evs[first-1].Seq, 10)
	}
	return evs, next, nil
}

// VoidScoreEvents voids submissions of a board (their eventIds, or '#<seq>' for one recorded without) for a
// reason: the void is an event of the ledger, the submissions stop counting, and the board is rebuilt from the
// events that still count (every window and period, SUM totals included); live screens see the change. It
// returns how many submissions it voided: voiding again is a no-op (0).
func (s *Store) VoidScoreEvents(ctx context.Context, board string, ids []string, reason string) (int, error) {
	if s.seq == nil {
		return 0, errorf(Invalid, "voidScoreEvents needs the ledger (DATABASE_URL)")
	}
	if len(ids) == 0 || len(ids) > MaxVoidIDs {
		return 0, errorf(Invalid, "eventIds must hold 1 to %d ids", MaxVoidIDs)
	}
	for _, id := range ids {
		if err := checkID("eventId", id); err != nil {
			return 0, err
		}
	}
	// The ledger keeps the reason as text (events.void_reason, standings' reason), which cannot hold a NUL: one
	// would fail the commit the void shares with the board's other writes.
	if reason == "" || len(reason) > MaxVoidReason || !utf8.ValidString(reason) || strings.IndexByte(reason, 0) >= 0 {
		return 0, errorf(Invalid, "reason must be 1 to %d bytes of UTF-8, without NUL", MaxVoidReason)
	}
	if _, err := s.loadBoard(ctx, board); err != nil {
		return 0, err
	}
	args, _ := json.Marshal(VoidArgs{EventIDs: ids, Reason: reason})
	w, err := s.writeEvent(ctx, board, LedgerEvent{Kind: EventVoid, Args: args})
	if err != nil {
		return 0, err
	}
	n := w.appended[0].Voided
	if n > 0 && !w.appended[0].Duplicate {
		if err := s.rebuildAfterVoid(ctx, board); err != nil {
			return n, err
		}
	}
	// Closed periods' frozen standings follow (new versions, correction events). Also when this void changed
	// nothing: a void whose correction failed is completed by its retry.
	if _, err := s.correctFrozen(ctx, board, reason); err != nil {
		return n, err
	}
	return n, nil
}

// heldPoll is how often a void whose rebuild another restore holds off looks whether that restore ended.
const heldPoll = 50 * time.Millisecond

// rebuildAfterVoid rebuilds a board after a recorded void. Another restore may hold the board (a ledger check's,
// another void's, another process's): it may have read the board's events before this void, so this one waits for
// it to end, then rebuilds the board if it is still marked (restoreBoard; otherwise it only catches up). Past the
// request's deadline the answer is UNAVAILABLE with the outcome open: the void is recorded, and the mark has the
// board rebuilt by the next ledger check.
func (s *Store) rebuildAfterVoid(ctx context.Context, board string) error {
	err := s.Rebuild(ctx, board)
	for errors.Is(err, errRestoringNow) {
		t := time.NewTimer(heldPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Error{Code: Unavailable, Message: fmt.Sprintf("the void is recorded; leaderboard %q is being "+
				"restored, and is rebuilt without the voided events after it", board), Err: ctx.Err()}
		case <-t.C:
		}
		err = s.rebuild(ctx, board, false)
	}
	return err
}
