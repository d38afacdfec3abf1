package leaderboard

import "context"

// RemovePlayer removes a player from every window and period of a board that still exists (the current one, the
// retained closed ones, and every one the grace window can still feed), records, histogram and display data
// included, and publishes the change. It reports whether the player had a score anywhere.
func (s *Store) RemovePlayer(ctx context.Context, board, player string) (bool, error) {
	if err := checkID("player id", player); err != nil {
		return false, err
	}
	if s.seq != nil {
		return s.removeLedgered(ctx, board, player)
	}
	var n int64
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
		n, err = s.run(ctx, removeScript, []string{s.keyBase(board)}, args...).Int64()
		return redisError(err)
	})
	return n > 0, err
}
