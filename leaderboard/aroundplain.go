package leaderboard

import (
	"cmp"
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
//  3. only when names or updatedAt are asked: a pipeline of a ZRANGE of each window as round 2 placed it, with
//     aroundMargin rows more on either side: the candidates, the players whose names and records the snapshot
//     reads (a window's players are known only once it is read);
//  4. one MULTI/EXEC, the snapshot: the definition, the period's state, ZCARD, and for each player its ZRANK
//     and a ZRANGE WITHSCORES of the same rows as round 3 (the players without a record: their record again, at
//     the layout of that moment), and the candidates' names (HMGET m) and records (HGET) when asked.
//
// The snapshot proves the rest: a member that exists is the player's entry, whose rank and the size of that
// moment give around.lua's window (aroundWindow), which must lie within the rows read; a player without a record
// still has none; each row of the window is a candidate (its name is then of that moment) whose record holds the
// row's arrival token (the one copy of the player's record, so its updatedAt is the row's). A player whose proof
// fails (it submitted, or moved more than aroundMargin places between the round trips) is read again, and after
// plainRanksTries by the script, as are the reads the plain read cannot answer (plainAroundFit) and any Redis
// error reply.

// aroundMargin is the rows a plain aroundMe read takes on either side of the window round 2 gives, for moves
// between round 2 and the snapshot.
const aroundMargin = 2

// plainAroundFit reports whether the plain read may answer an Around read of b with fields arg: entries without
// tie ranks (a ZCOUNT by a score known only in the snapshot), on boards without exactTop (whose tail players get
// an estimate).
func plainAroundFit(b *Board, arg int) bool {
	return b.ExactTop == 0 && arg&int(FieldTieRank) == 0
}

// aroundWindow is the aroundMe window: the first and last rank (0-based) of the radius entries either side of
// rank r among n, filled in at the edges. around.lua runs the same rule as around_window (luaAroundWindow).
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

// aroundMarker is the line of common.lua that renderCommon replaces with luaAroundWindow.
const aroundMarker = "-- @around (rendered from aroundplain.go)\n"

// luaAroundWindow is aroundWindow in Lua, for around.lua: the script learns the player's rank and the board's size
// only inside its call, and asking Go for the window would take a second round trip. TestAroundWindow runs both.
const luaAroundWindow = `-- rendered from aroundplain.go (luaAroundWindow): aroundWindow
local function around_window(r, n, radius)
  local start = max(0, r - radius)
  local stop = start + 2 * radius
  if stop > n - 1 then
    stop = n - 1
    start = max(0, stop - 2 * radius)
  end
  return start, stop
end
`

// aroundMany answers the Around reads of players (radius, fields arg) on one view, by player: one plain read for
// them all when there are several and it fits, the script for the others (concurrently) and for a lone one; on a
// sharded board, one plain read for them all, alone too (aroundShardedMany).
func (s *Store) aroundMany(ctx context.Context, v View, players []string, radius, arg int) (map[string][]Entry, error) {
	ids := make([]string, 0, len(players))
	seen := make(map[string]bool, len(players))
	for _, id := range players {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var out map[string][]Entry
	err := s.byLayout(ctx, v, func(r Resolved, cb *cachedBoard) (err error) {
		out, err = s.aroundShardedMany(ctx, r, cb, ids, radius, arg)
		return err
	}, func() (err error) {
		out, err = s.aroundManyUnsharded(ctx, v, ids, radius, arg)
		return err
	})
	return out, err
}

// aroundManyUnsharded is aroundMany of distinct ids on a board of one shard.
func (s *Store) aroundManyUnsharded(ctx context.Context, v View, ids []string, radius, arg int) (map[string][]Entry,
	error) {
	out := make(map[string][]Entry, len(ids))
	left := ids
	if len(ids) > 1 {
		fits := func(b *Board) bool { return plainAroundFit(b, arg) }
		err := s.plainRead(ctx, v, fits, func(r Resolved) error {
			clear(out)
			left = ids
			replies, rest, err := s.aroundPlain(ctx, r, ids, radius, arg)
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
	err := aroundEach(left, out, func(id string) ([]Entry, error) {
		p, err := s.read(ctx, v, aroundScript, id, radius, arg)
		if err != nil {
			return nil, err
		}
		return p.Entries, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// aroundEach sets out[id] to read(id) for each of ids, concurrently (a lone one in this goroutine), and returns the
// first error: the reads of the players that no shared read answered.
func aroundEach(ids []string, out map[string][]Entry, read func(id string) ([]Entry, error)) error {
	if len(ids) == 1 {
		es, err := read(ids[0])
		if err == nil {
			out[ids[0]] = es
		}
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es, err := read(id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, err)
				return
			}
			out[id] = es
		}()
	}
	wg.Wait()
	return first
}

// aroundPlain reads the Around replies ({size, entry...}, as around.lua's without tie ranks; updatedAt and names
// as arg asks) of distinct players in r, by player, and returns the players it leaves to the script.
func (s *Store) aroundPlain(ctx context.Context, r Resolved, players []string, radius, arg int) (map[string][]any, []string, error) {
	base := s.keyBase(r.Board.ID)
	stateKey, zsetKey := keyState.at(base, r.Window, r.Period), keyRanking.at(base, r.Window, r.Period)
	recPrefix := recordsPrefix(base, r.Window, r.Period)
	layout, err := s.lastLayout(ctx, stateKey, recPrefix)
	if err != nil {
		return nil, nil, err
	}
	wantTs, wantMeta := arg&int(FieldUpdatedAt) != 0, arg&int(FieldMeta) != 0
	type read struct {
		id, key, member string // member: "" when the player had no record
		rec             *redis.StringCmd
		near            *redis.IntCmd // round 2's ZRANK
		from, to        int64         // the ranks of the rows rounds 3 and 4 read (to < from: none)
		cands           *redis.StringSliceCmd
		rank            *redis.IntCmd // the snapshot's ZRANK
		rows            *redis.ZSliceCmd
		again           *redis.StringCmd // the snapshot's record, of a player without one
		extra           aroundExtra
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
			rd.member, rd.from, rd.to, rd.cands = "", 0, -1, nil
			rec, err := rd.rec.Result()
			if err == redis.Nil {
				continue
			}
			_, member, tail, ok := recordMember(rec, rd.id)
			if !ok || tail {
				rest = append(rest, rd.id)
				pending = append(pending[:i], pending[i+1:]...)
				i--
				continue
			}
			rd.member = member
			present++
		}
		// Round 2: where the windows are.
		if present > 0 {
			var size *redis.IntCmd
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
			for _, rd := range pending {
				if rd.member == "" {
					continue
				}
				if q, err := rd.near.Result(); err == nil { // else the member is gone: the player changed
					start, stop := aroundWindow(q, size.Val(), radius)
					rd.from, rd.to = max(0, start-aroundMargin), stop+aroundMargin
				}
			}
		}
		// Round 3: the candidates, when names or updatedAt are asked.
		if (wantTs || wantMeta) && present > 0 {
			_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, rd := range pending {
					rd.cands = nil
					if rd.to >= rd.from {
						rd.cands = p.ZRange(ctx, zsetKey, rd.from, rd.to)
					}
				}
				return nil
			})
			if err != nil && err != redis.Nil {
				return nil, nil, plainError(err)
			}
		}
		// Round 4: the snapshot.
		var def *redis.StringCmd
		var state *redis.SliceCmd
		var card *redis.IntCmd
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			def = p.Get(ctx, keyDef.of(base))
			state = p.HMGet(ctx, stateKey, stateFields...)
			card = p.ZCard(ctx, zsetKey)
			for _, rd := range pending {
				rd.rank, rd.rows, rd.again, rd.extra = nil, nil, nil, aroundExtra{}
				if rd.member == "" {
					rd.again = p.HGet(ctx, rd.key, rd.id)
					continue
				}
				if rd.to < rd.from {
					continue
				}
				rd.rank = p.ZRank(ctx, zsetKey, rd.member)
				rd.rows = p.ZRangeWithScores(ctx, zsetKey, rd.from, rd.to)
				if rd.cands != nil {
					rd.extra.read(ctx, p, rd.cands.Val(), base, recPrefix, layout, wantTs, wantMeta)
				}
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
			var extra *aroundExtra
			if rd.cands != nil {
				extra = &rd.extra
			}
			if reply, ok := aroundReply(st[0], rd.member, rd.rank, rd.rows, rd.from, n, radius, extra); ok &&
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

// aroundExtra is what a plain aroundMe read's snapshot reads of its candidates (round 3) when names or updatedAt
// are asked: their names and their records, by the candidate's place in ids.
type aroundExtra struct {
	ids   []string
	metas *redis.SliceCmd    // nil: names not asked
	recs  []*redis.StringCmd // nil: updatedAt not asked
	index map[string]int     // ids by player, made when a row is not at its candidate's place
}

// read queues the snapshot's reads of the candidates (sorted-set members) on p: their names (HMGET m) and their
// records (HGET at layout).
func (x *aroundExtra) read(ctx context.Context, p redis.Pipeliner, members []string, base, recPrefix string,
	layout recordLayout, wantTs, wantMeta bool) {
	x.ids = make([]string, len(members))
	for i, m := range members {
		x.ids[i] = memberPlayer(m)
	}
	if len(x.ids) == 0 {
		return
	}
	if wantMeta {
		x.metas = p.HMGet(ctx, keyNames.of(base), x.ids...)
	}
	if wantTs {
		x.recs = make([]*redis.StringCmd, len(x.ids))
		for i, id := range x.ids {
			x.recs[i] = p.HGet(ctx, layout.key(recPrefix, id), id)
		}
	}
}

// fill returns the updatedAt (0 when not asked) and name ("" when not asked or none) of the row of a player with
// sorted-set member m, the row's rank less the first candidate's being k; false when the snapshot does not prove
// them: the player is not a candidate, or the record read is not the one of this member.
func (x *aroundExtra) fill(k int, player, m string) (ts int64, meta string, ok bool) {
	j := k
	if j < 0 || j >= len(x.ids) || x.ids[j] != player {
		if x.index == nil {
			x.index = make(map[string]int, len(x.ids))
			for i, id := range x.ids {
				x.index[id] = i
			}
		}
		if j, ok = x.index[player]; !ok {
			return 0, "", false
		}
	}
	if x.metas != nil {
		v := x.metas.Val()
		if len(v) != len(x.ids) {
			return 0, "", false
		}
		meta = toString(v[j])
	}
	if x.recs != nil {
		rec, err := x.recs[j].Result()
		if err != nil {
			return 0, "", false
		}
		t, member, tail, valid := recordMember(rec, player)
		if !valid || tail || member != m {
			return 0, "", false
		}
		ts = t
	}
	return ts, meta, true
}

// aroundReply makes around.lua's reply for a player from a plain read's snapshot, or returns false when the
// snapshot does not prove it: the member (empty: the player had no record, whose proof is the caller's) must
// have a rank (rank), its window among n must lie within the rows read from rank from, and extra (nil: neither
// names nor updatedAt asked) must prove each row's.
func aroundReply(size any, member string, rank *redis.IntCmd, rows *redis.ZSliceCmd, from, n int64,
	radius int, extra *aroundExtra) ([]any, bool) {
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
		player := memberPlayer(m)
		var ts int64
		var meta string
		if extra != nil {
			var ok bool
			if ts, meta, ok = extra.fill(int(k-from), player, m); !ok {
				return nil, false
			}
		}
		reply = append(reply, exactRow(player, k, scoreText(z.Score), ts, meta))
	}
	return reply, true
}
