package leaderboard

import (
	"context"
	"strconv"
	"sync"
)

// Ranks on a sharded board without a script. shardnear.lua's Lua (its definition check, the period's state, the
// player's record parsed and its row made) was most of Redis's time in a rank read of a sharded board (BENCHMARKS.md,
// table 8e). The plain read does that work in Go: each shard's players are read as an unsharded board's are
// (ranksPlainAt: their records, then one snapshot of their shard that proves them), and placed on the other shards
// with plain counts (placeOn). Three round trips instead of two, the first two on the players' own shards only;
// grouped like the unsharded plain reads (rankgroup.go), so that concurrent reads share them. Whatever the plain
// read cannot answer (plainRanksFit, a proof that fails plainRanksTries times, a Redis error reply) goes to the
// script's path.

// ranksShardedPlain is ranksSharded by plain reads, or errUseScript.
func (s *Store) ranksShardedPlain(ctx context.Context, r Resolved, v *cachedBoard, players []string, arg int) (*Page,
	error) {
	found, owns, err := s.readOwnShards(ctx, r, v, players, arg)
	if err != nil {
		return nil, err
	}
	known := make([]int64, len(v.shards)) // each shard's size, where its own players were read
	for k, o := range owns {
		known[k] = -1
		if o.asked {
			known[k] = o.size
		}
	}
	size, err := s.placeElsewhere(ctx, r, v, 0, found, known)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*placed, len(found))
	for _, p := range found {
		byID[p.row.player] = p
	}
	return r.rankPage(players, byID, size, false), nil
}

// ownShard is a plain read of players on their own shard: those found, placed there, and the shard's size then.
type ownShard struct {
	asked bool
	size  int64
	found []*placed
	err   error
}

// readOwnShard reads players on their shard at key base as ranksPlainAt reads an unsharded board, and makes each
// entry of its reply a row with its place on that shard.
func (s *Store) readOwnShard(ctx context.Context, r Resolved, base string, players []string, arg int) ownShard {
	reply, members, err := s.ranksPlainAt(ctx, r, base, players, arg&int(FieldUpdatedAt|FieldMeta))
	if err != nil {
		return ownShard{err: err}
	}
	size := toInt(reply[0])
	o := ownShard{asked: true, size: size, found: make([]*placed, 0, len(members))}
	for i, rv := range reply[1:] {
		row, _ := rv.([]any) // exactRow
		if len(row) != 7 || i >= len(members) {
			return ownShard{err: errUseScript}
		}
		xs := toString(row[3])
		x, err := strconv.ParseFloat(xs, 64)
		if err != nil {
			return ownShard{err: errUseScript}
		}
		o.found = append(o.found, &placed{
			row: shardRow{player: toString(row[0]), xs: xs, x: x, ts: toInt(row[4]), meta: toString(row[5]),
				tok: memberToken(members[i])},
			ahead: toInt(row[1]) - 1,
			after: size - toInt(row[1]),
		})
	}
	return o
}

// readOwnShards reads players on their own shards (readOwnShard, the shards at once): the players found, each with
// its row and its place on its shard (placed.ahead, placed.after), and whether each shard was read (its size then
// in sizes).
func (s *Store) readOwnShards(ctx context.Context, r Resolved, v *cachedBoard, players []string, arg int) (
	[]*placed, []ownShard, error) {
	n := len(v.shards)
	mine := make([][]string, n) // the players of each shard
	for _, pl := range players {
		k := ShardOf(pl, n)
		mine[k] = append(mine[k], pl)
	}
	owns := make([]ownShard, n)
	var wg sync.WaitGroup
	for k, list := range mine {
		if list == nil {
			continue
		}
		read := func() { owns[k] = s.readOwnShard(ctx, r, v.shards[k], list, arg) }
		if len(players) == len(list) {
			read() // every player on one shard: nothing to wait for
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			read()
		}()
	}
	wg.Wait()
	var found []*placed
	for _, o := range owns {
		if o.err != nil {
			return nil, nil, o.err
		}
		found = append(found, o.found...)
	}
	return found, owns, nil
}
