package leaderboard

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

var (
	//go:embed fence.lua
	fenceLua    string
	fenceScript = newScript("fence", fenceLua, true)
)

// Fence is the close fence of a closed period: the period is closed and its standings are final. close.lua sets
// it in the step that reads the standings for the period's close event, and every script that writes a period
// refuses a fenced one, so the period holds what the event announced for as long as its keys exist. See close.go.
type Fence struct {
	// OutboxID is the outbox id of the period's close event; "" when the period closed without one (nobody played).
	OutboxID string
	// ExpiresIn is how long the fence (Redis's clock) still lives, at least as long as the period's keys; 0: for
	// ever.
	ExpiresIn time.Duration
}

// Fence returns the close fence of a window period of the board, nil while the period is open.
func (s *Store) Fence(ctx context.Context, board string, w Window, period string) (*Fence, error) {
	if _, ok := windowCodes[w]; !ok {
		return nil, errorf(Invalid, "unknown window %q", string(w))
	}
	if err := checkID("period", period); err != nil {
		return nil, err
	}
	var f *Fence
	err := s.fresh(board, func() error {
		b, err := s.Board(ctx, board)
		if err != nil {
			return err
		}
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		reply, err := s.run(ctx, fenceScript, []string{s.keyBase(board)}, b.sum, windowCodes[w], period).Slice()
		if err != nil {
			return redisError(err)
		}
		switch len(reply) {
		case 0:
			f = nil
		case 2:
			f = &Fence{OutboxID: toString(reply[0])}
			if ms := toInt(reply[1]); ms > 0 {
				f.ExpiresIn = time.Duration(ms) * time.Millisecond
			}
		default:
			return redisError(fmt.Errorf("fence script returned %d values", len(reply)))
		}
		return nil
	})
	return f, err
}
