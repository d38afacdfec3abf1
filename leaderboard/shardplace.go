package leaderboard

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// shardplace.go: places on the shards of a sharded board counted without a script. Placing (score, token) on a
// shard is counting its players ahead: those with a better score (ZCOUNT) and those with the same score and an
// earlier token (the score's members, whose tokens prefix them). The fixed cost of a shardnear.lua call (its
// definition check, the period's state, Lua) was most of Redis's time in a placement (BENCHMARKS.md, scenario 8c);
// plain commands in one pipeline count the same. shardnear.lua still answers what plain commands cannot: boards
// with exactTop (the tail's counts come from its histogram), probes that list neighbours or look for a player,
// and a score shared by more than placeEqualMax players on a shard (their members would be a long reply).

// placeEqualMax is the most players with one score whose members the plain count reads.
const placeEqualMax = 32

// placeOn is nearOn (which it calls when the plain count does not fit): for probes that only count, the players
// ahead of each probe on each shard, those with a better score, and each shard's size. With read, it also checks
// each shard's definition as the script would (defHolds): a read of a board whose shard lost its keys answers
// NOT_FOUND (the ledger restores it), never a count short of that shard; a submission's placement, made after the
// submission was applied, does not fail on it.
func (s *Store) placeOn(ctx context.Context, v *cachedBoard, w Window, p string, fields int, probes [][]shardProbe,
	read bool) ([]nearShard, error) {
	if !plainPlaceFits(v.b, probes) {
		return s.nearOn(ctx, v, w, p, fields, probes)
	}
	type counts struct {
		def        *redis.StringCmd
		size       *redis.IntCmd
		better, eq []*redis.IntCmd
		members    []*redis.StringSliceCmd
	}
	cs := make([]*counts, len(probes))
	pipe := s.rdb.Pipeline()
	for k, list := range probes {
		if list == nil {
			continue
		}
		z := keyRanking.at(v.shards[k], w, p)
		c := &counts{size: pipe.ZCard(ctx, z), better: make([]*redis.IntCmd, len(list)), eq: make([]*redis.IntCmd, len(list)),
			members: make([]*redis.StringSliceCmd, len(list))}
		if read {
			c.def = pipe.Get(ctx, keyDef.of(v.shards[k]))
		}
		for j, pr := range list {
			if pr.x == "-inf" {
				continue // before everybody
			}
			c.better[j] = pipe.ZCount(ctx, z, "-inf", "("+pr.x)
			switch pr.tok {
			case "": // before every player with the score
			case "+":
				c.eq[j] = pipe.ZCount(ctx, z, pr.x, pr.x)
			default:
				// One more than placeEqualMax tells that there are too many to read.
				c.members[j] = pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: z, Start: pr.x, Stop: pr.x, ByScore: true,
					Count: placeEqualMax + 1})
			}
		}
		cs[k] = c
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, redisError(err)
	}
	out := make([]nearShard, len(probes))
	for k, list := range probes {
		c := cs[k]
		if c == nil {
			continue
		}
		if c.def != nil {
			if err := defHolds(c.def, v.b.sum); err != nil {
				return nil, err
			}
		}
		sh := nearShard{asked: true, size: c.size.Val(), probes: make([]nearProbe, len(list))}
		for j, pr := range list {
			if c.better[j] == nil {
				continue
			}
			np := nearProbe{better: c.better[j].Val()}
			np.ahead = np.better
			switch {
			case c.eq[j] != nil:
				np.ahead += c.eq[j].Val()
			case c.members[j] != nil:
				ms := c.members[j].Val()
				if len(ms) > placeEqualMax {
					return s.nearOn(ctx, v, w, p, fields, probes)
				}
				for _, m := range ms {
					if memberToken(m) < pr.tok {
						np.ahead++
					}
				}
			}
			sh.probes[j] = np
		}
		out[k] = sh
	}
	return out, nil
}

// placeElsewhere places each of found on the shards it does not live on (placeOn: one round trip, every shard at
// once), adding the players ahead of it and those with a better score there to its own counts and its probes'
// answers to its near; it returns the board's size: each shard's as this round counted it, else known[k] (-1: not
// known, so it is counted).
func (s *Store) placeElsewhere(ctx context.Context, r Resolved, v *cachedBoard, fields int, found []*placed,
	known []int64) (int64, error) {
	n := len(v.shards)
	probes := make([][]shardProbe, n)
	whose := make([][]*placed, n) // the player of each probe
	for k := range probes {
		for _, p := range found {
			if ShardOf(p.row.player, n) != k {
				// The player is not on shard k: no own member to look for there (player '').
				probes[k] = append(probes[k], shardProbe{x: p.row.xs, tok: p.row.tok, nb: p.nb, na: p.na})
				whose[k] = append(whose[k], p)
			}
		}
		if probes[k] == nil && known[k] < 0 {
			probes[k] = []shardProbe{} // its size
		}
	}
	near, err := s.placeOn(ctx, v, r.Window, r.Period, fields, probes, true)
	if err != nil {
		return 0, err
	}
	var size int64
	for k := range near {
		if near[k].asked {
			size += near[k].size
		} else {
			size += known[k]
		}
		for j, pr := range near[k].probes {
			p := whose[k][j]
			p.ahead += pr.ahead
			p.better += pr.better
			if p.cuts != nil {
				p.cuts[k] = near[k].cut
			}
			p.near = append(p.near, pr)
		}
	}
	return size, nil
}

// plainPlaceFits reports whether placeOn may count probes with plain commands: a board without exactTop, and probes
// that neither list neighbours nor look for a player.
func plainPlaceFits(b *Board, probes [][]shardProbe) bool {
	if b.ExactTop > 0 {
		return false
	}
	for _, list := range probes {
		for _, pr := range list {
			if pr.x == "?" || pr.player != "" || pr.nb > 0 || pr.na > 0 {
				return false
			}
		}
	}
	return true
}

// memberToken is the arrival token that starts a sorted-set member (member_token of shardnear.lua): tokens order as
// bytes, and a token's first digit gives its length.
func memberToken(m string) string {
	return m[:len(m)-len(memberPlayer(m))]
}
