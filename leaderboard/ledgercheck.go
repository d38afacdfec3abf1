package leaderboard

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// ledgercheck.go: the periodic comparison of every board the ledger holds with Redis, which starts the restores
// (restore.go) of the boards Redis lost or holds behind.

// CheckLedger compares every board the ledger holds with Redis: a board Redis lacks is restored, a board whose
// high-water mark is behind the ledger's head gets its missing events (a failover to a replica that had not copied
// them, writes whose apply failed). It starts those restores and returns how many boards it found lost or behind;
// the restores run in the background, and a board without its definition is restored when a second check in a
// row finds it so.
// It also puts back into the outboxes the close events whose delivery has not completed and that Redis no longer
// holds (ResendUndelivered).
func (s *Store) CheckLedger(ctx context.Context) (int, error) {
	if s.seq == nil {
		return 0, nil
	}
	boards, err := s.seq.ledger.Boards(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	s.undefinedMu.Lock()
	defer s.undefinedMu.Unlock()
	undefined := map[string]bool{}
	defer func() { s.undefined = undefined }()
	for start := 0; start < len(boards); start += 1000 {
		part := boards[start:min(start+1000, len(boards))]
		pipe := s.rdb.Pipeline()
		defs := make([]*redis.StringCmd, len(part))
		hwms := make([]*redis.StringCmd, len(part))
		voids := make([]*redis.StringCmd, len(part))
		lbks := make([]*redis.StringCmd, len(part))
		for i, b := range part {
			base := s.makeKeyBase(b.ID)
			defs[i] = pipe.Get(ctx, keyDef.of(base))
			hwms[i] = pipe.HGet(ctx, keyCounters.of(base), "lsq")
			voids[i] = pipe.HGet(ctx, keyCounters.of(base), "void")
			lbks[i] = pipe.HGet(ctx, keyCounters.of(base), boardKeyField)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return n, redisError(err)
		}
		// Shards 1.. of sharded boards are checked as shard 0 is: a primary that lost one shard loses part of a board.
		var shards []string
		var shardOf []int // the index in part of each of shards
		for i := range part {
			if b := decodeSharded(defs[i].Val()); b != nil {
				for _, base := range s.shardBases(b.ID, b.Shards)[1:] {
					shards, shardOf = append(shards, base), append(shardOf, i)
				}
			}
		}
		behind := make([]bool, len(part))
		if len(shards) > 0 {
			pipe := s.rdb.Pipeline()
			sdefs := make([]*redis.IntCmd, len(shards))
			shwms := make([]*redis.StringCmd, len(shards))
			slbks := make([]*redis.StringCmd, len(shards))
			for j, base := range shards {
				sdefs[j] = pipe.Exists(ctx, keyDef.of(base))
				shwms[j] = pipe.HGet(ctx, keyCounters.of(base), "lsq")
				slbks[j] = pipe.HGet(ctx, keyCounters.of(base), boardKeyField)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return n, redisError(err)
			}
			for j, i := range shardOf {
				hwm, _ := shwms[j].Int64()
				behind[i] = behind[i] || sdefs[j].Val() != 1 || hwm < part[i].Head ||
					otherBoard(slbks[j].Val(), part[i].Key)
			}
		}
		for i, b := range part {
			hwm, _ := hwms[i].Int64()
			if defs[i].Val() != "" && hwm >= b.Head && voids[i].Val() == "" && !behind[i] &&
				!otherBoard(lbks[i].Val(), b.Key) {
				continue
			}
			if defs[i].Val() == "" && s.seq.creating(b.ID) {
				continue // recorded, its definition not applied yet: this process's creation applies it
			}
			if defs[i].Val() == "" && !s.undefined[b.ID] {
				// Lost, or being created right now by another process (recorded, its definition not applied yet:
				// a restore would answer its creator UNAVAILABLE). Lost if so at the next check too; a request to a
				// lost board starts its restore at once anyway.
				undefined[b.ID] = true
				n++
				continue
			}
			// A board written right now is behind for a moment; its writer applies its own events. What stays
			// behind is caught up by the restore (which takes the events the gate has not seen).
			s.seq.restore.start(s.seq, b.ID)
			n++
		}
	}
	// Close events Redis lost before their delivery completed (the boards restored now: at their restore's end).
	if _, err := s.ResendUndelivered(ctx, 0); err != nil {
		return n, err
	}
	return n, nil
}
