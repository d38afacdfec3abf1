package leaderboard

import (
	"context"
	"fmt"
)

// RemovePlayer removes a player from every window and period of a board that still exists and is not closed (the
// current one, and every one the grace window can still feed), records, histogram and display data included, and
// publishes the change. It reports whether the player had a score in any of them. Closed periods are final (their
// close fence, see Store.Fence): they keep the player, and so does the player's display data; a player whose
// scores are all in closed periods is PeriodClosed, and nothing changes.
func (s *Store) RemovePlayer(ctx context.Context, board, player string) (bool, error) {
	if err := checkID("player id", player); err != nil {
		return false, err
	}
	if s.seq != nil {
		return s.removeLedgered(ctx, board, player)
	}
	var removed, kept int64
	err := s.fresh(board, func() error {
		b, err := s.Board(ctx, board)
		if err != nil {
			return err
		}
		args := []any{b.sum, player, s.publishArg(), s.Channel(board)}
		for _, wp := range b.livePeriods(s.cfg.Clock()) {
			args = append(args, windowCodes[wp.Window], wp.Period)
		}
		seasons, err := s.liveSeasons(ctx, b)
		if err != nil {
			return err
		}
		for _, id := range seasons {
			args = append(args, windowCodes[Season], id)
		}
		release, err := s.writes.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		var reply []int64
		if v, _ := s.loadBoard(ctx, board); v != nil && v.b.Sharded() {
			reply, err = s.removeSharded(ctx, v, args, player)
		} else {
			reply, err = s.run(ctx, removeScript, []string{s.keyBase(board)}, args...).Int64Slice()
		}
		if err != nil {
			return redisError(err)
		}
		if len(reply) != 2 {
			return redisError(fmt.Errorf("remove script returned %d values", len(reply)))
		}
		removed, kept = reply[0], reply[1]
		return nil
	})
	if err == nil && removed == 0 && kept > 0 {
		return false, errorf(PeriodClosed, "player %q has scores only in closed periods, which are final", player)
	}
	return removed > 0, err
}
