package leaderboard

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// aroundMe on a sharded board: without a script where it can (aroundShardedPlain), else through shardnear.lua
// (aroundSharded, the path of tie ranks and exactTop boards).
//
// Without a script. shardnear.lua built every neighbour row in Lua (its member parsed,
// its record and name read when asked, the row made and returned): most of Redis's time in an aroundMe read of a
// sharded board (BENCHMARKS.md, table 8e). The plain read, for every player of a group at once:
//
//  1. and 2. the players read on their own shards as ranks are (readOwnShard): each one's score, arrival token,
//     place on its shard, updatedAt and name;
//  3. every shard at once, each in one MULTI/EXEC: its definition, its size, and per player the players with a better score
//     (ZCOUNT), those with the player's score (their members, at most placeEqualMax + 1), the nearest nb with a
//     better score and the nearest na with a worse one (ZRANGE BYSCORE WITHSCORES): each shard's part of the board
//     around the player;
//  4. when updatedAt or names are asked: the records and names of the players each window shows, on their shards.
//
// Each shard answers round 3 at one moment; the shards at moments within the read's span, as with the script. A
// row whose record in round 4 is not the row's (its player wrote between rounds 3 and 4) sends the read to the
// script, as do a score shared by more than placeEqualMax players of a shard, and what plainAroundFit refuses.

// aroundNeed is how many neighbours each shard lists on either side of a player with ahead players before it and
// after after it on its own shard: radius, or 2 * radius on a side where the window can reach further (fewer than
// radius players on the other side of its own shard: aroundWindow shifts there, and the board has at least as
// many players on a side as the player's shard has).
func aroundNeed(ahead, after int64, radius int) (nb, na int) {
	nb, na = 2*radius, 2*radius
	if after >= int64(radius) {
		nb = radius
	}
	if ahead >= int64(radius) {
		na = radius
	}
	return nb, na
}

// aroundRows is the aroundMe window of me, at players ahead of it among n (the players a window may show), from its
// neighbours on every shard (before, after; unsorted): radius either side, as aroundWindow places them, and the
// first row's 0-based rank. The lists hold enough for every shard's own moment (each lists nb before and na after
// as aroundNeed asks); min only guards a player that moved between the round trips.
func aroundRows(me shardRow, before, after []shardRow, at, n int64, radius int) ([]shardRow, int64) {
	slices.SortFunc(before, compareRows)
	slices.SortFunc(after, compareRows)
	start, stop := aroundWindow(at, n, radius)
	nb := min(max(at-start, 0), int64(len(before)))
	rows := make([]shardRow, 0, stop-start+1)
	rows = append(rows, before[int64(len(before))-nb:]...)
	rows = append(rows, me)
	rows = append(rows, after[:min(max(stop-at, 0), int64(len(after)))]...)
	return rows, at - nb
}

// aroundShardedPlain reads the aroundMe windows (radius, fields arg) of distinct players on a sharded board without
// exactTop, by player (an empty window for a player without a score), or returns errUseScript.
func (s *Store) aroundShardedPlain(ctx context.Context, r Resolved, v *cachedBoard, players []string, radius,
	arg int) (map[string][]Entry, error) {
	found, _, err := s.readOwnShards(ctx, r, v, players, arg)
	if err != nil {
		return nil, err
	}
	n := len(v.shards)
	type probe struct {
		better      *redis.IntCmd
		eq          *redis.StringSliceCmd
		before, aft *redis.ZSliceCmd
	}
	sizes := make([]*redis.IntCmd, n)
	defs := make([]*redis.StringCmd, n)
	probes := make([][]probe, len(found))
	still := make([]*redis.FloatCmd, len(found)) // each player's own member, on its shard, in round 3
	for i := range found {
		probes[i] = make([]probe, n)
	}
	// Each shard in a transaction of its own (all at once): its counts and lists of one moment, so that no player
	// shows twice (listed before the probe, then after it, having moved in between).
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			z := keyRanking.at(v.shards[k], r.Window, r.Period)
			_, errs[k] = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				defs[k] = pipe.Get(ctx, keyDef.of(v.shards[k]))
				sizes[k] = pipe.ZCard(ctx, z)
				for i, p := range found {
					nb, na := aroundNeed(p.ahead, p.after, radius)
					if ShardOf(p.row.player, n) == k {
						still[i] = pipe.ZScore(ctx, z, p.row.tok+p.row.player)
					}
					pr := &probes[i][k]
					pr.better = pipe.ZCount(ctx, z, "-inf", "("+p.row.xs)
					pr.eq = pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: z, Start: p.row.xs, Stop: p.row.xs,
						ByScore: true, Count: placeEqualMax + 1})
					if nb > 0 {
						pr.before = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: z, Start: "(" + p.row.xs,
							Stop: "-inf", ByScore: true, Rev: true, Count: int64(nb)})
					}
					if na > 0 {
						pr.aft = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: z, Start: "(" + p.row.xs,
							Stop: "+inf", ByScore: true, Count: int64(na)})
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil && err != redis.Nil {
			return nil, plainError(err)
		}
		// As check_def: a shard that lost its keys makes the read NOT_FOUND (the ledger restores it), not short.
		if err := defHolds(defs[k], v.b.sum); err != nil {
			return nil, err
		}
	}
	var size int64
	for _, c := range sizes {
		size += c.Val()
	}
	out := make(map[string][]Entry, len(players))
	for _, pl := range players {
		out[pl] = []Entry{} // no score: an empty window
	}
	windows := make([][]shardRow, len(found))
	starts := make([]int64, len(found))
	var moved []string // players that wrote between rounds 2 and 3: their shard's counts are not of their place
	for i, p := range found {
		me := p.row
		if x, err := still[i].Result(); err != nil || x != me.x {
			moved = append(moved, me.player)
			continue
		}
		var at int64
		var before, after []shardRow
		for _, pr := range probes[i] {
			at += pr.better.Val()
			eq := pr.eq.Val()
			if len(eq) > placeEqualMax {
				return nil, errUseScript
			}
			for _, m := range eq {
				row := shardRow{player: memberPlayer(m), xs: me.xs, x: me.x, tok: memberToken(m)}
				switch {
				case row.player == me.player: // its own member
				case row.tok < me.tok: // tokens order as bytes
					at++
					before = append(before, row)
				default:
					after = append(after, row)
				}
			}
			before = appendZRows(before, pr.before, me.player)
			after = appendZRows(after, pr.aft, me.player)
		}
		rows, start := aroundRows(me, before, after, at, size, radius)
		starts[i] = start
		windows[i] = rows
	}
	if arg&int(FieldUpdatedAt|FieldMeta) != 0 {
		if err := s.fillRows(ctx, r, v, found, windows, arg); err != nil {
			return nil, err
		}
	}
	for i, p := range found {
		if windows[i] == nil {
			continue // moved
		}
		entries := make([]Entry, len(windows[i]))
		for k, row := range windows[i] {
			entries[k] = r.Board.entryOf(row, starts[i]+int64(k)+1, 0, size)
		}
		out[p.row.player] = entries
	}
	for _, pl := range moved {
		// Read again by the script path, which finds and places the player on its shard at one moment.
		es, err := s.aroundSharded(ctx, r, v, pl, radius, arg)
		if err != nil {
			return nil, err
		}
		out[pl] = es
	}
	return out, nil
}

// appendZRows appends the rows of a ZRANGE … WITHSCORES reply (nil: not asked) to rows, but player's own.
func appendZRows(rows []shardRow, c *redis.ZSliceCmd, player string) []shardRow {
	if c == nil {
		return rows
	}
	for _, z := range c.Val() {
		m, _ := z.Member.(string)
		if pl := memberPlayer(m); pl != player {
			rows = append(rows, shardRow{player: pl, xs: strconv.FormatFloat(z.Score, 'g', -1, 64), x: z.Score,
				tok: memberToken(m)})
		}
	}
	return rows
}

// fillRows reads the updatedAt and names (as arg asks) of the rows of windows (found[i]'s window is windows[i],
// found[i] itself filled already) on their shards, in one pipeline; errUseScript when a row's record is not the
// row's any more.
func (s *Store) fillRows(ctx context.Context, r Resolved, v *cachedBoard, found []*placed, windows [][]shardRow,
	arg int) error {
	n := len(v.shards)
	wantTs, wantMeta := arg&int(FieldUpdatedAt) != 0, arg&int(FieldMeta) != 0
	type ref struct{ w, k int } // windows[w][k]
	byShard := make([][]ref, n)
	for w, rows := range windows {
		for k, row := range rows {
			if row.player != found[w].row.player {
				sh := ShardOf(row.player, n)
				byShard[sh] = append(byShard[sh], ref{w, k})
			}
		}
	}
	layouts := make([]recordLayout, n)
	prefixes := make([]string, n)
	if wantTs {
		for k, refs := range byShard {
			if len(refs) == 0 {
				continue
			}
			prefixes[k] = recordsPrefix(v.shards[k], r.Window, r.Period)
			l, err := s.lastLayout(ctx, keyState.at(v.shards[k], r.Window, r.Period), prefixes[k])
			if err != nil {
				return err
			}
			layouts[k] = l
		}
	}
	recs := make([][]*redis.StringCmd, n)
	metas := make([]*redis.SliceCmd, n)
	pipe := s.rdb.Pipeline()
	for k, refs := range byShard {
		if len(refs) == 0 {
			continue
		}
		ids := make([]string, len(refs))
		for j, rf := range refs {
			ids[j] = windows[rf.w][rf.k].player
		}
		if wantMeta {
			metas[k] = pipe.HMGet(ctx, keyNames.of(v.shards[k]), ids...)
		}
		if wantTs {
			recs[k] = make([]*redis.StringCmd, len(ids))
			for j, id := range ids {
				recs[k][j] = pipe.HGet(ctx, layouts[k].key(prefixes[k], id), id)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return plainError(err)
	}
	for k, refs := range byShard {
		for j, rf := range refs {
			row := &windows[rf.w][rf.k]
			if metas[k] != nil {
				vals := metas[k].Val()
				if len(vals) != len(refs) {
					return errUseScript
				}
				row.meta = toString(vals[j])
			}
			if recs[k] != nil {
				rec, err := recs[k][j].Result()
				if err != nil {
					return errUseScript // gone, or moved by a split of the records since the layout was seen
				}
				ts, member, tail, ok := recordMember(rec, row.player)
				if !ok || tail || member != row.tok+row.player {
					return errUseScript
				}
				row.ts = ts
			}
		}
	}
	return nil
}

// aroundShardedMany answers the Around reads of distinct players on a sharded board, by player: one plain read for
// them all where it fits and can, else shardnear.lua's read for each (concurrently).
func (s *Store) aroundShardedMany(ctx context.Context, r Resolved, v *cachedBoard, players []string, radius,
	arg int) (map[string][]Entry, error) {
	if plainAroundFit(r.Board, arg) {
		out, err := s.aroundShardedPlain(ctx, r, v, players, radius, arg)
		if !errors.Is(err, errUseScript) {
			if err == nil {
				s.plainReads.Add(int64(len(players)))
				s.plainArounds.Add(int64(len(players)))
			}
			return out, err
		}
	}
	out := make(map[string][]Entry, len(players))
	if err := aroundEach(players, out, func(pl string) ([]Entry, error) {
		return s.aroundSharded(ctx, r, v, pl, radius, arg)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// aroundSharded is Around on a sharded board: the player found on its shard, with its 2 * radius neighbours there
// either side, then every other shard's neighbours of its place, merged into the window around the player's rank
// on the whole board.
func (s *Store) aroundSharded(ctx context.Context, r Resolved, v *cachedBoard, player string, radius, arg int) ([]Entry, error) {
	fields := arg & int(FieldUpdatedAt|FieldMeta|FieldTieRank)
	// The window is radius players either side of the player, more on one side only within radius of the top or
	// the bottom (aroundWindow). A player with radius players ahead (after) on its own shard has as many on the
	// board, so the other shards need list only radius after (before) it: the board's nearest k on a side are
	// among every shard's nearest k. exactTop boards end the window at the exact tier instead: both sides kept.
	var narrow func(ahead, after int64) (int, int)
	if r.Board.ExactTop == 0 {
		narrow = func(ahead, after int64) (int, int) { return aroundNeed(ahead, after, radius) }
	}
	found, size, err := s.placePlayers(ctx, r, v, fields, []string{player}, 2*radius, 2*radius, narrow)
	if err != nil {
		return nil, err
	}
	f, ok := found[player]
	if !ok {
		return []Entry{}, nil
	}
	me, at, better := f.row, f.ahead, f.better
	if r.Board.approxAt(at+1) || !f.exact() {
		// Beyond exactTop: the player's own estimated entry, as on a board of one shard.
		tie := int64(0)
		if arg&int(FieldTieRank) != 0 {
			tie = min(better+1, at+1)
		}
		e := r.Board.entryOf(me, at+1, tie, size)
		e.Approximate = true
		return []Entry{e}, nil
	}
	var before, after []shardRow
	for _, pr := range f.near {
		// A write of the player's between the two round trips may list it among its own neighbours.
		for _, row := range pr.before {
			if row.player != player {
				before = append(before, row)
			}
		}
		for _, row := range pr.after {
			if row.player != player {
				after = append(after, row)
			}
		}
	}
	n := r.Board.exactRows(size)
	if slices.ContainsFunc(f.cuts, func(c tailCut) bool { return c.set }) {
		// The board's exact tier ends at the first row after the player that another shard's tail may precede
		// (tailCut; the rows before the player precede it, so they are in the tier): so does the window. Each shard
		// listed 2 * radius after the player, so fewer kept than that is where the tier ends.
		slices.SortFunc(after, compareRows)
		after = after[:exactPrefix(after, f.cuts)]
		if len(after) < 2*radius {
			n = min(n, at+1+int64(len(after)))
		}
	}
	rows, start := aroundRows(me, before, after, at, n, radius)
	ties := map[float64]int64{me.x: better + 1}
	if arg&int(FieldTieRank) != 0 {
		// A neighbour's tie rank is 1 + the players with a better score on every shard: one more round trip for
		// the scores the window has besides the player's.
		var probes []shardProbe
		for _, row := range rows {
			if _, ok := ties[row.x]; !ok {
				ties[row.x] = 0
				probes = append(probes, shardProbe{x: row.xs})
			}
		}
		if len(probes) > 0 {
			near, err := s.nearOnShards(ctx, v, r.Window, r.Period, 0, probes)
			if err != nil {
				return nil, err
			}
			for j, pr := range probes {
				var b int64
				for _, sh := range near {
					b += sh.probes[j].better
				}
				x, _ := strconv.ParseFloat(pr.x, 64)
				ties[x] = b + 1
			}
		}
	}
	out := make([]Entry, len(rows))
	for k, row := range rows {
		tie := int64(0)
		if arg&int(FieldTieRank) != 0 {
			tie = ties[row.x]
		}
		out[k] = r.Board.entryOf(row, start+int64(k)+1, tie, size)
	}
	return out, nil
}
