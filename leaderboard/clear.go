package leaderboard

import "context"

// clear.go: a board's keys deleted for a fresh start, its outbox and locks kept: a restore clears the board it
// rebuilds (restore.go), a scratch replay the keys it built (scratch.go).

// clearBoard deletes every key of a board (on every shard: bases) but the restore lock and the outbox (a rebuild,
// or what a failed restore left): the board answers NOT_FOUND (UNAVAILABLE with the ledger) from the first step on.
func (s *Store) clearBoard(ctx context.Context, board string, bases []string, lock string) error {
	// The definitions go first, in a step of their own: from then on nobody reads or writes the board.
	for _, base := range bases {
		if err := s.rdb.Del(ctx, keyDef.of(base), keyRestoreDef.of(base)).Err(); err != nil {
			return redisError(err)
		}
	}
	s.rdb.SRem(ctx, s.registryKey(board), board)
	for _, base := range bases {
		if err := s.clearBase(ctx, base, lock); err != nil {
			return err
		}
	}
	return nil
}

// clearBase deletes the keys under one key base but the restore lock, the outbox and its dead letters: the close
// events that went out, and the webhooks' deliveries of them, are not the index's to rebuild.
func (s *Store) clearBase(ctx context.Context, base, lock string) error {
	node, err := s.slotNode(ctx, base)
	if err != nil {
		return redisError(err)
	}
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, globEscape(base)+"*", PurgeBatch).Result()
		if err != nil {
			return redisError(err)
		}
		del := keys[:0]
		for _, k := range keys {
			if k != lock && k != keyOutbox.of(base) && k != keyDeadLetter.of(base) {
				del = append(del, k)
			}
		}
		if len(del) > 0 {
			// One key per UNLINK: the keys of one slot, but a cluster client still wants them per call.
			pipe := s.rdb.Pipeline()
			for _, k := range del {
				pipe.Unlink(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return redisError(err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
