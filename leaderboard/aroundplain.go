package leaderboard

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// aroundMe without a script. around.lua spends most of its Redis time in its own Lua (a record parsed, a token
// made, eleven rows turned into entries: ~76 of ~97 µs a read under load), not in its commands. Alone, a read
// without a script needs three round trips and saves nothing (measured: Redis 63–81 against 68–85 µs a read);
// the reads of one view that arrive together (rankgroup.go) share them, and then each costs Redis a third:
//
//  1. a pipeline of each player's record (HGET at the period's record layout as last seen): the member;
//  2. a pipeline of ZCARD and each member's ZRANK: where its window will be;
//  3. one MULTI/EXEC, the snapshot: the definition, the period's state, ZCARD, and for each player its ZRANK
//     and a ZRANGE WITHSCORES of its window as round 2 placed it with aroundMargin rows more on either side (the
//     players without a record: their record again, at the layout of that moment).
//
// The snapshot proves the rest: a member that exists is the player's entry, whose rank and the size of that
// moment give around.lua's window (aroundWindow), which must lie within the rows read; a player without a record
// still has none. A player whose proof fails (it submitted, or moved more than aroundMargin places between the
// round trips) is read again, and after plainRanksTries by the script, as are the reads the plain read cannot
// answer (plainAroundFit) and any Redis error reply.

// aroundMargin is the rows a plain aroundMe read takes on either side of the window round 2 gives, for moves
// between round 2 and the snapshot.
const aroundMargin = 2

// plainAroundFit reports whether the plain read may answer an Around read of b with fields arg: entries without
// updatedAt, tie ranks or names and metadata (each a command a row of a window known only in the snapshot), on
// boards without exactTop (whose tail players get an estimate).
func plainAroundFit(b *Board, arg int) bool {
	return b.ExactTop == 0 && arg&int(FieldUpdatedAt|FieldTieRank|FieldMeta) == 0
}

// aroundWindow is around.lua's window: the first and last rank (0-based) of the radius entries either side of
// rank r among n, filled in at the edges.
func aroundWindow(r, n int64, radius int) (start, stop int64) {
	R := int64(radius)
	start = max(0, r-R)
	stop = start + 2*R
	if stop > n-1 {
		stop = n - 1
		start = max(0, stop-2*R)
	}
	return start, stop
}

// aroundMany answers the Around reads of players (radius, fields arg) on one view, by player: one plain read for
// them all when there are several and it fits, the script for the others (concurrently) and for a lone one.
func (s *Store) aroundMany(ctx context.Context, v View, players []string, radius, arg int) (map[string][]Entry, error) {
	ids := make([]string, 0, len(players))
	seen := make(map[string]bool, len(players))
	for _, id := range players {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	out := make(map[string][]Entry, len(ids))
	left := ids
	if len(ids) > 1 {
		fits := func(b *Board) bool { return plainAroundFit(b, arg) }
		err := s.plainRead(ctx, v, fits, func(r Resolved) error {
			clear(out)
			left = ids
			replies, rest, err := s.aroundPlain(ctx, r, ids, radius)
			if err != nil {
				return err
			}
			for id, reply := range replies {
				p, err := s.pageOf(r, reply)
				if err != nil {
					return err
				}
				out[id] = p.Entries
			}
			s.plainReads.Add(int64(len(replies)))
			s.plainArounds.Add(int64(len(replies)))
			left = rest
			return nil
		})
		if err != nil && !errors.Is(err, errUseScript) {
			return nil, err
		}
	}
	if len(left) == 1 {
		p, err := s.read(ctx, v, aroundScript, left[0], radius, arg)
		if err != nil {
			return nil, err
		}
		out[left[0]] = p.Entries
		return out, nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, id := range left {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.read(ctx, v, aroundScript, id, radius, arg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			out[id] = p.Entries
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// aroundPlain reads the Around replies ({size, entry...}, as around.lua's without updatedAt, tie ranks and
// names) of distinct players in r, by player, and returns the players it leaves to the script.
func (s *Store) aroundPlain(ctx context.Context, r Resolved, players []string, radius int) (map[string][]any, []string, error) {
	base := s.keyBase(r.Board.ID)
	period := windowCodes[r.Window] + ":" + r.Period
	stateKey, zsetKey, recPrefix := base+"s:"+period, base+"z:"+period, base+"r:"+period+":"
	layout, err := s.lastLayout(ctx, stateKey, recPrefix)
	if err != nil {
		return nil, nil, err
	}
	type read struct {
		id, key, member string // member: "" when the player had no record
		rec             *redis.StringCmd
		near            *redis.IntCmd // round 2's ZRANK
		from            int64         // the first rank of the rows read in the snapshot
		rank            *redis.IntCmd // the snapshot's ZRANK
		rows            *redis.ZSliceCmd
		again           *redis.StringCmd // the snapshot's record, of a player without one
	}
	replies := make(map[string][]any, len(players))
	var rest []string
	pending := make([]*read, len(players))
	for i, id := range players {
		pending[i] = &read{id: id}
	}
	for try := 0; try < plainRanksTries && len(pending) > 0; try++ {
		if try > 0 {
			s.plainRetries.Add(1)
		}
		// Round 1: the records.
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, rd := range pending {
				rd.key = layout.key(recPrefix, rd.id)
				rd.rec = p.HGet(ctx, rd.key, rd.id)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, nil, plainError(err)
		}
		present := 0
		for i := 0; i < len(pending); i++ {
			rd := pending[i]
			rd.member = ""
			rec, err := rd.rec.Result()
			if err == redis.Nil {
				continue
			}
			_, n, tail, ok := parseRecord(rec)
			if !ok || tail {
				rest = append(rest, rd.id)
				pending = append(pending[:i], pending[i+1:]...)
				i--
				continue
			}
			rd.member = arrivalToken(n) + rd.id
			present++
		}
		// Round 2: where the windows are.
		var size *redis.IntCmd
		if present > 0 {
			_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				size = p.ZCard(ctx, zsetKey)
				for _, rd := range pending {
					if rd.member != "" {
						rd.near = p.ZRank(ctx, zsetKey, rd.member)
					}
				}
				return nil
			})
			if err != nil && err != redis.Nil {
				return nil, nil, plainError(err)
			}
		}
		// Round 3: the snapshot.
		var def *redis.StringCmd
		var state *redis.SliceCmd
		var card *redis.IntCmd
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			def = p.Get(ctx, base+"def")
			state = p.HMGet(ctx, stateKey, stateFields...)
			card = p.ZCard(ctx, zsetKey)
			for _, rd := range pending {
				rd.rank, rd.rows, rd.again = nil, nil, nil
				if rd.member == "" {
					rd.again = p.HGet(ctx, rd.key, rd.id)
					continue
				}
				q, err := rd.near.Result()
				if err != nil { // the member is gone: the player changed; read it again
					continue
				}
				start, stop := aroundWindow(q, size.Val(), radius)
				rd.from = max(0, start-aroundMargin)
				rd.rank = p.ZRank(ctx, zsetKey, rd.member)
				rd.rows = p.ZRangeWithScores(ctx, zsetKey, rd.from, stop+aroundMargin)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, nil, plainError(err)
		}
		st, now, err := s.snapshotState(r, def, state, recPrefix)
		if err != nil {
			return nil, nil, err
		}
		n := card.Val()
		next := pending[:0]
		for _, rd := range pending {
			if reply, ok := aroundReply(st[0], rd.member, rd.rank, rd.rows, rd.from, n, radius); ok &&
				(rd.member != "" || rd.again.Err() == redis.Nil && now.key(recPrefix, rd.id) == rd.key) {
				replies[rd.id] = reply
				continue
			}
			next = append(next, rd)
		}
		pending = next
		layout = now
	}
	for _, rd := range pending {
		rest = append(rest, rd.id)
	}
	return replies, rest, nil
}

// aroundReply makes around.lua's reply for a player from a plain read's snapshot, or returns false when the
// snapshot does not prove it: the member (empty: the player had no record, whose proof is the caller's) must
// have a rank (rank), and its window among n must lie within the rows read from rank from.
func aroundReply(size any, member string, rank *redis.IntCmd, rows *redis.ZSliceCmd, from, n int64,
	radius int) ([]any, bool) {
	reply := []any{toInt(size)}
	if member == "" {
		return reply, true
	}
	if rank == nil {
		return nil, false
	}
	r, err := rank.Result()
	if err != nil {
		return nil, false
	}
	zs, err := rows.Result()
	if err != nil {
		return nil, false
	}
	start, stop := aroundWindow(r, n, radius)
	if start < from || stop >= from+int64(len(zs)) {
		return nil, false
	}
	for k := start; k <= stop; k++ {
		z := zs[k-from]
		m, _ := z.Member.(string)
		reply = append(reply, []any{memberPlayer(m), k + 1, int64(0), scoreText(z.Score), int64(0), "", int64(0)})
	}
	return reply, true
}
