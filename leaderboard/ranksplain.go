package leaderboard

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Ranks without a script. A read of many players' entries (friends) spent most of its Redis time in ranks.lua's
// own Lua (hashing ids, parsing records, making tokens and reply rows), not in its commands. The plain read does
// that work in Go and has Redis run only commands, in two round trips:
//
//  1. a pipeline of each player's record (HGET at the record hash of the period's layout as last seen): a record
//     gives the player's sorted-set member (arrival token .. id);
//  2. one MULTI/EXEC that reads all the answer holds at one moment: the definition, the period's state (size and
//     layout), the members' scores (ZMSCORE) and ranks (ZRANK), the records of the players that had none (and of
//     all of them when updatedAt is asked), names (HMGET m) and the change version (HMGET c) when asked.
//
// The second is the snapshot and proves the first true of it: a member that exists is the player's entry (one
// per player), and the players without a record still have none at the keys of the layout of that moment (the
// only copy of a record: a split moves it). With updatedAt, the records read again must be the ones read first.
// When the proof fails (a player submitted, was removed or moved between the round trips) the read starts again,
// and after plainRanksTries it goes to the script, as do the reads the plain read cannot answer: exactTop boards
// (a tail record has no member; its rank is the histogram's), tie ranks (a ZCOUNT by a score known only in the
// snapshot), anything that is not a record, and a Redis error reply (a cluster slot moving, a command the server
// lacks).

// plainRanksTries is how many snapshots a plain read takes before it leaves the read to the script.
const plainRanksTries = 3

// plainRanksLayouts bounds the record layouts the plain reads remember, one per window period read.
const plainRanksLayouts = 4096

// recordLayouts remembers the record layout of each window period a plain read saw last, by its record keys'
// prefix; a stale one costs a read one more snapshot. It is emptied when it would hold more than
// plainRanksLayouts periods (periods come and go; the live ones are back after one read each).
type recordLayouts struct {
	mu sync.RWMutex
	m  map[string]recordLayout
}

func (c *recordLayouts) get(prefix string) (recordLayout, bool) {
	c.mu.RLock()
	l, ok := c.m[prefix]
	c.mu.RUnlock()
	return l, ok
}

// set remembers l, taking the write lock only when it changes what is remembered.
func (c *recordLayouts) set(prefix string, l recordLayout) {
	if old, ok := c.get(prefix); ok && old == l {
		return
	}
	c.mu.Lock()
	if _, ok := c.m[prefix]; !ok && len(c.m) >= plainRanksLayouts || c.m == nil {
		c.m = make(map[string]recordLayout)
	}
	c.m[prefix] = l
	c.mu.Unlock()
}

// errUseScript says that the plain read cannot answer and the script must.
var errUseScript = errors.New("read with the script")

// plainRanksFit reports whether the plain read may answer a Ranks read of b with fields arg (readArg).
func plainRanksFit(b *Board, arg int) bool {
	return b.ExactTop == 0 && arg&int(FieldTieRank) == 0
}

// ranks answers Ranks: with the plain read when it fits and can, else with ranks.lua.
func (s *Store) ranks(ctx context.Context, v View, players []string, arg int) (*Page, error) {
	var p *Page
	err := s.byLayout(ctx, v, func(r Resolved, cb *cachedBoard) (err error) {
		p, err = s.ranksSharded(ctx, r, cb, players, arg)
		return err
	}, func() (err error) {
		p, err = s.ranksUnsharded(ctx, v, players, arg)
		return err
	})
	return p, err
}

// ranksUnsharded is ranks on a board of one shard.
func (s *Store) ranksUnsharded(ctx context.Context, v View, players []string, arg int) (*Page, error) {
	var p *Page
	fits := func(b *Board) bool { return plainRanksFit(b, arg) }
	err := s.plainRead(ctx, v, fits, func(r Resolved) error {
		reply, err := s.ranksPlain(ctx, r, players, arg)
		if err != nil {
			return err
		}
		p, err = s.pageOf(r, reply)
		return err
	})
	if !errors.Is(err, errUseScript) {
		if err == nil {
			s.plainReads.Add(1)
		}
		return p, err
	}
	args := make([]any, 0, len(players)+1)
	args = append(args, arg)
	for _, id := range players {
		args = append(args, id)
	}
	return s.read(ctx, v, ranksScript, args...)
}

// plainRead runs read on v resolved, holding a read slot, when fits says a plain read may answer on its board
// (else errUseScript), and again when the board's definition changed under it (fresh).
func (s *Store) plainRead(ctx context.Context, v View, fits func(*Board) bool, read func(Resolved) error) error {
	return s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		if r.Board.Sharded() {
			return errLayout // a read of shard 0 alone
		}
		if !fits(r.Board) {
			return errUseScript
		}
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		return read(r)
	})
}

// ranksPlain reads the entries of players in r as ranks.lua would reply them ({size, [epoch, version,]
// entry...}), or returns errUseScript.
func (s *Store) ranksPlain(ctx context.Context, r Resolved, players []string, arg int) ([]any, error) {
	reply, _, err := s.ranksPlainAt(ctx, r, s.keyBase(r.Board.ID), players, arg)
	return reply, err
}

// ranksPlainAt is ranksPlain on the board (or shard) at key base, which also returns the sorted-set member of
// each entry of the reply, in its order.
func (s *Store) ranksPlainAt(ctx context.Context, r Resolved, base string, players []string, arg int) ([]any, []string,
	error) {
	stateKey, zsetKey := keyState.at(base, r.Window, r.Period), keyRanking.at(base, r.Window, r.Period)
	recPrefix := recordsPrefix(base, r.Window, r.Period)
	layout, err := s.lastLayout(ctx, stateKey, recPrefix)
	if err != nil {
		return nil, nil, err
	}
	wantTs, wantMeta, wantVersion := arg&int(FieldUpdatedAt) != 0, arg&int(FieldMeta) != 0, arg&readVersion != 0
	keys := make([]string, len(players))
	recs := make([]*redis.StringCmd, len(players))
	members := make([]string, 0, len(players))
	for try := 0; try < plainRanksTries; try++ {
		// Round 1: the records.
		for i, id := range players {
			keys[i] = layout.key(recPrefix, id)
		}
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range players {
				recs[i] = p.HGet(ctx, keys[i], id)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, nil, plainError(err)
		}
		members = members[:0]
		for i, id := range players {
			rec, err := recs[i].Result()
			if err == redis.Nil {
				continue
			}
			_, member, tail, ok := recordMember(rec, id)
			if !ok || tail {
				return nil, nil, errUseScript
			}
			members = append(members, member)
		}
		// Round 2: the snapshot.
		var def *redis.StringCmd
		var state, metas, version *redis.SliceCmd
		var scores *redis.Cmd
		ranks := make([]*redis.IntCmd, len(members))
		again := make([]*redis.StringCmd, len(players)) // records read again: nil where not
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			def = p.Get(ctx, keyDef.of(base))
			state = p.HMGet(ctx, stateKey, stateFields...)
			if len(members) > 0 {
				args := make([]any, 0, len(members)+2)
				args = append(args, "zmscore", zsetKey)
				for _, m := range members {
					args = append(args, m)
				}
				scores = p.Do(ctx, args...)
			}
			for k, m := range members {
				ranks[k] = p.ZRank(ctx, zsetKey, m)
			}
			for i, id := range players {
				if wantTs || recs[i].Err() == redis.Nil {
					again[i] = p.HGet(ctx, keys[i], id)
				}
			}
			if wantMeta && len(members) > 0 {
				ids := make([]string, 0, len(members))
				for i, id := range players {
					if recs[i].Err() == nil {
						ids = append(ids, id)
					}
				}
				metas = p.HMGet(ctx, keyNames.of(base), ids...)
			}
			if wantVersion {
				version = p.HMGet(ctx, keyCounters.of(base), "ep", "ver")
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
		reply, ok := plainReply(st[0], players, keys, recs, again, now, recPrefix, scores, ranks, metas, version)
		if ok {
			return reply, members, nil
		}
		s.plainRetries.Add(1)
		layout = now
	}
	return nil, nil, errUseScript
}

// lastLayout is the record layout of a window period as a plain read last saw it, else as Redis has it now.
func (s *Store) lastLayout(ctx context.Context, stateKey, recPrefix string) (recordLayout, error) {
	if l, ok := s.layouts.get(recPrefix); ok {
		return l, nil
	}
	st, err := s.rdb.HMGet(ctx, stateKey, stateFields...).Result()
	if err != nil {
		return recordLayout{}, plainError(err)
	}
	return layoutOf(st[0], st[1], st[2], st[3]), nil
}

// stateFields are the fields of a period's state a plain read reads: cnt (the size), then the record layout.
var stateFields = []string{"cnt", "lvl", "sp", "hv"}

// snapshotState checks a plain read's snapshot of the board's definition (GET def) against r, and returns the
// period's state it read (HMGET stateFields) and the record layout of that moment, which it remembers.
func (s *Store) snapshotState(r Resolved, def *redis.StringCmd, state *redis.SliceCmd,
	recPrefix string) ([]any, recordLayout, error) {
	if err := defHolds(def, r.Board.sum); err != nil {
		return nil, recordLayout{}, err
	}
	st, err := state.Result()
	if err != nil {
		return nil, recordLayout{}, plainError(err)
	}
	if len(st) != len(stateFields) {
		return nil, recordLayout{}, errUseScript
	}
	now := layoutOf(st[0], st[1], st[2], st[3])
	s.layouts.set(recPrefix, now)
	return st, now, nil
}

// defHolds is check_def of common.lua for a plain read that read the definition (GET def): NOT_FOUND when the board
// (or the shard) has none, errStaleDef when it is not the one whose SHA-1 is sum.
func defHolds(def *redis.StringCmd, sum string) error {
	switch d, err := def.Result(); {
	case err == redis.Nil:
		return errorf(NotFound, "no leaderboard with this id")
	case err != nil:
		return plainError(err)
	case defSum(d) != sum:
		return &Error{Code: Internal, Message: "internal error", Err: errStaleDef}
	}
	return nil
}

// plainReply makes ranks.lua's reply from a plain read's two round trips, or returns false when the snapshot
// (round 2) does not prove the records of round 1 (see ranksPlain).
func plainReply(size any, players, keys []string, recs, again []*redis.StringCmd, now recordLayout,
	recPrefix string, scores *redis.Cmd, ranks []*redis.IntCmd, metas, version *redis.SliceCmd) ([]any, bool) {
	var xs []any
	if scores != nil {
		v, err := scores.Slice()
		if err != nil || len(v) != len(ranks) {
			return nil, false
		}
		xs = v
	}
	reply := make([]any, 0, 3+len(ranks))
	reply = append(reply, toInt(size))
	if version != nil {
		v := version.Val()
		if len(v) != 2 {
			return nil, false
		}
		reply = append(reply, toString(v[0]), toInt(v[1]))
	}
	var names []any
	if metas != nil {
		names = metas.Val()
		if len(names) != len(ranks) {
			return nil, false
		}
	}
	k := 0 // the member of players[i], when it has a record
	for i, id := range players {
		first, err := recs[i].Result()
		if err == redis.Nil {
			// No record in round 1: none in the snapshot either, at the key the layout then gives.
			if again[i].Err() != redis.Nil || now.key(recPrefix, id) != keys[i] {
				return nil, false
			}
			continue
		}
		var ts int64
		if again[i] != nil { // updatedAt asked: the record is the one round 1 read
			if rec, err := again[i].Result(); err != nil || rec != first {
				return nil, false
			}
			ts, _, _, _ = parseRecord(first)
		}
		rank, err := ranks[k].Result()
		if err != nil || xs[k] == nil { // the member is gone: the player changed
			return nil, false
		}
		meta := ""
		if names != nil {
			meta = toString(names[k])
		}
		reply = append(reply, exactRow(id, rank, scoreText(xs[k]), ts, meta))
		k++
	}
	return reply, true
}

// scoreText is a score of a ZMSCORE reply as text: a string in RESP2, a double in RESP3.
func scoreText(v any) string {
	if x, ok := v.(float64); ok {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return toString(v)
}

// plainError is what a plain read does with a Redis failure: an error reply (a slot moving, a command the server
// lacks, a transaction aborted) leaves the read to the script, which has its own ways with them; a failure to
// reach Redis is the read's error.
func plainError(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return errUseScript
	}
	return redisError(err)
}
