package leaderboard

import "context"

// RemovePlayer removes a player from every window and retained period of a board, records, histogram and display
// data included, and publishes the change. It reports whether the player had a score anywhere.
func (s *Store) RemovePlayer(ctx context.Context, board, player string) (bool, error) {
	if err := checkID("player id", player); err != nil {
		return false, err
	}
	b, err := s.Board(ctx, board)
	if err != nil {
		return false, err
	}
	args := []any{player, s.publishArg(), s.Channel(board)}
	now := s.cfg.Clock()
	loc := b.Location()
	for _, w := range b.Windows {
		if w == AllTime {
			args = append(args, windowCodes[w], AllPeriod)
			continue
		}
		// The current period, the retained closed ones, and one more in case the grace window still feeds it.
		start := periodStart(w, now, loc)
		for i := 0; i <= b.Retention+1; i++ {
			args = append(args, windowCodes[w], periodKey(w, nextStart(w, start, -i)))
		}
	}
	n, err := removeScript.Run(ctx, s.rdb, []string{s.keyBase(board)}, args...).Int64()
	if err != nil {
		return false, redisError(err)
	}
	return n > 0, nil
}
