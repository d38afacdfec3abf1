package leaderboard

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reads of a sharded board (shard.go): each asks every shard in one parallel round trip and merges. A read that
// starts from a player (rank, aroundMe, friends) first finds and places the player on its shard, then places it on
// the other shards: without a script where it can (shardranks.go, shardaround.go: three round trips, grouped with
// concurrent reads), else through shardnear.lua (both: two round trips). Each shard answers for one moment, and the shards for moments
// within the read's span: a write on one shard during the read may show while another shard's does not.

var (
	//go:embed shardnear.lua
	shardNearLua    string
	shardNearScript = newScript("shardnear", shardNearLua, true).withItems(shardNearHeader, shardNearCount)
)

// shardnear.lua's header: definition, window, period, fields, number of probes (then 5 arguments a probe).
const (
	shardNearHeader = 5
	shardNearCount  = 4
)

// shardCall is one script call on one shard.
type shardCall struct {
	sc   *script
	base string
	args []any
	more []string // keys after the base's, if any (the slot's board list, the outbox)
}

// keys are the call's keys: its shard's key base, then more.
func (c *shardCall) keys() []string { return append([]string{c.base}, c.more...) }

// onShards runs calls at once and returns each call's reply or error: through the batcher when the store has one
// (which merges them with other requests' calls to the same shard and sends its pipelines to their nodes in
// parallel), else in one pipeline, which a cluster client sends to their nodes in parallel.
func (s *Store) onShards(ctx context.Context, calls []shardCall) ([]any, []error) {
	return s.runShards(ctx, calls, s.batch != nil)
}

// runShards is onShards, through the batcher only when batched: a ledgered call carries its gate last, which a
// merge of items would not keep.
func (s *Store) runShards(ctx context.Context, calls []shardCall, batched bool) ([]any, []error) {
	replies, errs := make([]any, len(calls)), make([]error, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	switch {
	case batched:
		var wg sync.WaitGroup
		for i, c := range calls[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmds[i+1] = s.batch.run(ctx, c.sc, c.keys(), c.args...)
			}()
		}
		cmds[0] = s.batch.run(ctx, calls[0].sc, calls[0].keys(), calls[0].args...)
		wg.Wait()
	case len(calls) == 1:
		cmds[0] = s.fns.run(ctx, calls[0].sc, calls[0].keys(), calls[0].args...)
	default:
		pipe := s.rdb.Pipeline()
		for i, c := range calls {
			cmds[i] = s.fns.queue(ctx, pipe, c.sc, c.keys(), c.args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, cmd := range cmds {
		if ScriptMissing(cmd.Err()) {
			cmd = s.fns.run(ctx, calls[i].sc, calls[i].keys(), calls[i].args...)
		}
		replies[i], errs[i] = cmd.Result()
		errs[i] = redisError(errs[i])
	}
	return replies, errs
}

// firstError is the first of errs that is not nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// shardProbe is a place on a board, (internal score, token), as shardnear.lua takes it: x "-inf" is before
// everybody, tok "" before everybody with score x; player is the probe's own player (not listed among its
// neighbours), nb and na how many neighbours before and after it to list.
type shardProbe struct {
	x, tok, player string
	nb, na         int
}

// shardRow is a player as a shard lists it.
type shardRow struct {
	player string
	xs     string // internal score as Redis printed it
	x      float64
	ts     int64
	meta   string
	tok    string
}

// compareRows orders rows as a board does: a better (lower internal) score first, then an earlier arrival token
// (tokens order as bytes: see token() in common.lua).
func compareRows(a, b shardRow) int {
	if c := cmp.Compare(a.x, b.x); c != 0 {
		return c
	}
	return cmp.Compare(a.tok, b.tok)
}

// nearShard is one shard's answer to shardnear.lua: the players in the period on it, and per probe the players
// ahead, those with a better score, and the neighbours asked for. asked is false for a shard not called.
type nearShard struct {
	asked  bool
	size   int64
	cut    tailCut // where its tail may begin (tailCut)
	probes []nearProbe
}

// cuts is each shard's tailCut (unset where not asked).
func cuts(near []nearShard) []tailCut {
	out := make([]tailCut, len(near))
	for k, sh := range near {
		out[k] = sh.cut
	}
	return out
}

// nearProbe is a probe's answer; me is the row of a '?' probe's player (nil when the shard does not have it,
// ahead then -1), inTail whether that player is in the shard's tail (exactTop).
type nearProbe struct {
	ahead, better int64
	before, after []shardRow
	me            *shardRow
	inTail        bool
}

// sizeOf is the players on every shard.
func sizeOf(near []nearShard) int64 {
	var n int64
	for _, sh := range near {
		n += sh.size
	}
	return n
}

// nearOnShards places the same probes on every shard of window period (w, p) of a sharded board, in one parallel
// round trip.
func (s *Store) nearOnShards(ctx context.Context, v *cachedBoard, w Window, p string, fields int,
	probes []shardProbe) ([]nearShard, error) {
	each := make([][]shardProbe, len(v.shards))
	for i := range each {
		each[i] = probes
		if each[i] == nil {
			each[i] = []shardProbe{}
		}
	}
	return s.nearOn(ctx, v, w, p, fields, each)
}

// nearOn places probes[k] on shard k, for every shard whose list is not nil, in one parallel round trip.
func (s *Store) nearOn(ctx context.Context, v *cachedBoard, w Window, p string, fields int,
	probes [][]shardProbe) ([]nearShard, error) {
	var calls []shardCall
	var shards []int
	for k, list := range probes {
		if list == nil {
			continue
		}
		if len(list) == 0 {
			list = sizeProbe // a reply per probe: one that lists nothing, for the shard's size
		}
		args := make([]any, 0, shardNearHeader+5*len(list))
		args = append(args, v.b.sum, windowCodes[w], p, fields, len(list))
		for _, pr := range list {
			args = append(args, pr.x, pr.tok, pr.player, pr.nb, pr.na)
		}
		calls = append(calls, shardCall{shardNearScript, v.shards[k], args, nil})
		shards = append(shards, k)
	}
	out := make([]nearShard, len(v.shards))
	if len(calls) == 0 {
		return out, nil
	}
	replies, errs := s.onShards(ctx, calls)
	if err := firstError(errs); err != nil {
		return nil, err
	}
	for c, r := range replies {
		k := shards[c]
		n := len(probes[k])
		rows, _ := r.([]any)
		if len(rows) != max(n, 1) {
			return nil, redisError(fmt.Errorf("shardnear returned %d values for %d probes", len(rows), n))
		}
		sh := nearShard{asked: true, probes: make([]nearProbe, n)}
		for j, pv := range rows {
			parts, _ := pv.([]any)
			if len(parts) != 8 && len(parts) != 9 {
				return nil, redisError(fmt.Errorf("shardnear: bad probe reply %T", pv))
			}
			sh.size = toInt(parts[4])
			cut, err := v.b.gapCut(toInt(parts[5]), toString(parts[6]))
			if err != nil {
				return nil, redisError(fmt.Errorf("shardnear: %w", err))
			}
			sh.cut = cut
			if j >= n {
				break // the size probe
			}
			pr := nearProbe{ahead: toInt(parts[0]), better: toInt(parts[1]), inTail: toInt(parts[7]) == 1}
			if pr.before, err = parseShardRows(parts[2]); err == nil {
				pr.after, err = parseShardRows(parts[3])
			}
			if err == nil && len(parts) == 9 {
				var me []shardRow
				if me, err = parseShardRows([]any{parts[8]}); err == nil {
					pr.me = &me[0]
				}
			}
			if err != nil {
				return nil, redisError(err)
			}
			sh.probes[j] = pr
		}
		out[k] = sh
	}
	return out, nil
}

// sizeProbe is the probe of a call that only asks a shard's size.
var sizeProbe = []shardProbe{{x: "-inf"}}

// parseShardRows reads shardnear.lua's rows: {player, internal score, updatedAt, meta, token}.
func parseShardRows(v any) ([]shardRow, error) {
	list, _ := v.([]any)
	out := make([]shardRow, 0, len(list))
	for _, rv := range list {
		row, _ := rv.([]any)
		if len(row) != 5 {
			return nil, fmt.Errorf("shardnear: bad row %v", rv)
		}
		r := shardRow{player: toString(row[0]), xs: toString(row[1]), ts: toInt(row[2]), meta: toString(row[3]),
			tok: toString(row[4])}
		x, err := strconv.ParseFloat(r.xs, 64)
		if err != nil {
			return nil, fmt.Errorf("shardnear: bad score %q", r.xs)
		}
		r.x = x
		out = append(out, r)
	}
	return out, nil
}

// entryOf is the entry of a row at rank (tie: its tie rank, 0 when not asked) among size players.
func (b *Board) entryOf(r shardRow, rank, tie, size int64) Entry {
	e := Entry{PlayerID: r.player, Rank: rank, TieRank: tie, Score: b.userScore(r.x),
		TopPercent: TopPercent(rank, size), Approximate: b.approxAt(rank)}
	if r.ts != 0 {
		e.UpdatedAt = time.Unix(r.ts, 0).UTC()
	}
	decodeMeta(r.meta, &e)
	return e
}

// byLayout runs sharded on a sharded board's view and plain on any other, choosing again when the path taken
// found the board created again with another layout since its definition was cached: errLayout (plain must
// refuse a board that resolves sharded, as readWith and plainRead do, or a board re-created with shards would be
// read on shard 0 alone), or NOT_FOUND from a shard of the layout before while the board exists with another
// definition.
func (s *Store) byLayout(ctx context.Context, v View, sharded func(Resolved, *cachedBoard) error,
	plain func() error) error {
	var err error
	for range 3 {
		var used string // the definition the sharded read was of
		ok, serr := s.shardedRead(ctx, v, func(r Resolved, cb *cachedBoard) error {
			used = r.Board.sum
			return sharded(r, cb)
		})
		err = serr
		if !ok {
			err = plain()
		}
		if ok && ErrorCode(err) == NotFound && used != "" {
			s.boards.Delete(v.Board)
			if now, lerr := s.loadBoard(ctx, v.Board); lerr == nil && now.b.sum != used {
				continue
			}
			return err
		}
		if !errors.Is(err, errLayout) {
			return err
		}
		s.boards.Delete(v.Board)
	}
	return err
}

// shardedRead runs read on a sharded board's view (with the board's cache entry), again when the definition
// changed under it. ok is false when the board is not sharded (or cannot be loaded: the plain path says why).
// Use it through byLayout.
func (s *Store) shardedRead(ctx context.Context, v View, read func(Resolved, *cachedBoard) error) (ok bool, err error) {
	cb, err := s.loadBoard(ctx, v.Board)
	if err != nil || !cb.b.Sharded() {
		return false, nil
	}
	return true, s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		cb, err := s.loadBoard(ctx, v.Board)
		if err != nil {
			return err
		}
		if !cb.b.Sharded() {
			return errLayout
		}
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		return read(r, cb)
	})
}

// topSharded is Top on a sharded board: every shard's first offset+first players, merged.
func (s *Store) topSharded(ctx context.Context, r Resolved, v *cachedBoard, offset, first int) (*Page, error) {
	if offset+first > MaxShardedDepth {
		return nil, errorf(Invalid, "offset + first must be at most %d on a sharded board", MaxShardedDepth)
	}
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, int(FieldUpdatedAt|FieldMeta),
		[]shardProbe{{x: "-inf", na: offset + first}})
	if err != nil {
		return nil, err
	}
	var rows []shardRow
	for _, sh := range near {
		rows = append(rows, sh.probes[0].after...)
	}
	slices.SortFunc(rows, compareRows)
	size := sizeOf(near)
	rows = rows[:r.Board.exactRows(int64(len(rows)))] // on exactTop boards only the exact tier is listed
	rows = rows[:exactPrefix(rows, cuts(near))]
	p := &Page{Board: r.Board.ID, Order: r.Board.Order, Window: r.Window, Period: r.Period, Size: size}
	// The merged rows start at rank 1, so each row's tie rank is the rank of the first row with its score.
	tie := int64(1)
	for k := range rows {
		if k > 0 && rows[k].x != rows[k-1].x {
			tie = int64(k) + 1
		}
		if k >= offset && k < offset+first {
			p.Entries = append(p.Entries, r.Board.entryOf(rows[k], int64(k)+1, tie, size))
		}
	}
	return p, nil
}

// placed is a player found on its shard (a '?' probe) and placed on the others: its row, the players ahead of it
// (its 0-based rank) and those with a better score on the whole board (counted on its own shard only when the
// fields asked FieldTieRank: a ZCOUNT saved).
type placed struct {
	row           shardRow
	ahead, better int64
	after         int64       // the players after it on its own shard (plain reads only: readOwnShard)
	nb, na        int         // the neighbours to list on the other shards
	near          []nearProbe // its probes' answers (neighbours) on every shard, unmerged (script reads only)
	shard         int         // its own shard
	inTail        bool        // it is in its shard's tail (exactTop)
	cuts          []tailCut   // every shard's tailCut as its probes found them (script reads only)
}

// exact reports whether the player's place is exact as far as the shards' tails go (tailCut): its rank is then
// exact when within exactTop.
func (p *placed) exact() bool { return !p.inTail && othersCut(p.cuts, p.shard).holds(p.row.x) }

// placePlayers finds players on their shards and places them on every other shard: two parallel round trips (the
// first asks only the shards that have players; the second every other shard, and the first ones again only for
// players that live elsewhere). nb, na: neighbours to list either side of each player, on its shard and, unless
// narrow tells fewer from its place there (its players ahead and after), on every other shard. It returns the
// players found, by id (each with its neighbours of every shard), and the board's size.
func (s *Store) placePlayers(ctx context.Context, r Resolved, v *cachedBoard, fields int, players []string,
	nb, na int, narrow func(ahead, after int64) (nb, na int)) (map[string]*placed, int64, error) {
	first := make([][]shardProbe, len(v.shards))
	for _, pl := range players {
		k := ShardOf(pl, len(v.shards))
		first[k] = append(first[k], shardProbe{x: "?", player: pl, nb: nb, na: na})
	}
	near1, err := s.nearOn(ctx, v, r.Window, r.Period, fields, first)
	if err != nil {
		return nil, 0, err
	}
	found := map[string]*placed{}
	var order []*placed
	known := make([]int64, len(v.shards)) // each shard's size, where the first round asked it
	for k, sh := range near1 {
		known[k] = -1
		if sh.asked {
			known[k] = sh.size
		}
		for j, pr := range sh.probes {
			if pr.me == nil {
				continue
			}
			p := &placed{row: *pr.me, ahead: pr.ahead, better: pr.better, nb: nb, na: na, near: []nearProbe{pr},
				shard: k, inTail: pr.inTail, cuts: make([]tailCut, len(v.shards))}
			p.cuts[k] = sh.cut
			if narrow != nil {
				p.nb, p.na = narrow(pr.ahead, sh.size-pr.ahead-1)
			}
			found[first[k][j].player] = p
			order = append(order, p)
		}
	}
	size, err := s.placeElsewhere(ctx, r, v, fields, order, known)
	if err != nil {
		return nil, 0, err
	}
	return found, size, nil
}

// rankPage is the Ranks page of players on a sharded board of size players: the entry of each player found (each
// once, in the order of players), with its tie rank when tie.
func (r Resolved) rankPage(players []string, found map[string]*placed, size int64, tie bool) *Page {
	p := &Page{Board: r.Board.ID, Order: r.Board.Order, Window: r.Window, Period: r.Period, Size: size,
		Entries: make([]Entry, 0, len(found))}
	for _, pl := range players {
		f, ok := found[pl]
		if !ok {
			continue
		}
		delete(found, pl) // a player listed twice is answered once
		var t int64
		if tie {
			t = f.better + 1
		}
		e := r.Board.entryOf(f.row, f.ahead+1, t, size)
		e.Approximate = e.Approximate || !f.exact()
		p.Entries = append(p.Entries, e)
	}
	return p
}

// ranksSharded is Ranks on a sharded board: the players found on their shards, then placed on the others; by plain
// reads where they fit (shardranks.go).
func (s *Store) ranksSharded(ctx context.Context, r Resolved, v *cachedBoard, players []string, arg int) (*Page, error) {
	if plainRanksFit(r.Board, arg) {
		p, err := s.ranksShardedPlain(ctx, r, v, players, arg)
		if !errors.Is(err, errUseScript) {
			if err == nil {
				s.plainReads.Add(1)
			}
			return p, err
		}
	}
	found, size, err := s.placePlayers(ctx, r, v, arg&int(FieldUpdatedAt|FieldMeta|FieldTieRank), players, 0, 0, nil)
	if err != nil {
		return nil, err
	}
	return r.rankPage(players, found, size, arg&int(FieldTieRank) != 0), nil
}

// sizeSharded is Size on a sharded board: the players of every shard.
func (s *Store) sizeSharded(ctx context.Context, r Resolved, v *cachedBoard) (int64, error) {
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, 0, nil)
	if err != nil {
		return 0, err
	}
	return sizeOf(near), nil
}
