package leaderboard

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reads of a sharded board (shard.go): each asks every shard in one parallel round trip and merges. A read that
// starts from a player (rank, aroundMe, friends) first finds the player on its shard (shardrows.lua), then places
// it on every shard (shardnear.lua): two round trips. Each shard answers for one moment, and the shards for moments
// within the read's span: a write on one shard during the read may show while another shard's does not.

var (
	//go:embed shardrows.lua
	shardRowsLua    string
	shardRowsScript = newScript("shardrows", shardRowsLua, true)
	//go:embed shardnear.lua
	shardNearLua    string
	shardNearScript = newScript("shardnear", shardNearLua, true)
)

// shardCall is one script call on one shard.
type shardCall struct {
	sc   *script
	base string
	args []any
}

// onShards runs calls in one pipeline, which a cluster client sends to their nodes in parallel, and returns each
// call's reply or error.
func (s *Store) onShards(ctx context.Context, calls []shardCall) ([]any, []error) {
	replies, errs := make([]any, len(calls)), make([]error, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 1 {
		cmds[0] = s.fns.run(ctx, calls[0].sc, []string{calls[0].base}, calls[0].args...)
	} else {
		pipe := s.rdb.Pipeline()
		for i, c := range calls {
			cmds[i] = s.fns.queue(ctx, pipe, c.sc, []string{c.base}, c.args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, cmd := range cmds {
		if ScriptMissing(cmd.Err()) {
			cmd = s.fns.run(ctx, calls[i].sc, []string{calls[i].base}, calls[i].args...)
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

// before reports whether row a ranks before row b: a better (lower internal) score, then an earlier token (tokens
// order as bytes: see token() in common.lua).
func (a *shardRow) before(b *shardRow) bool {
	if a.x != b.x {
		return a.x < b.x
	}
	return a.tok < b.tok
}

func compareRows(a, b shardRow) int {
	if c := cmp.Compare(a.x, b.x); c != 0 {
		return c
	}
	return cmp.Compare(a.tok, b.tok)
}

// nearShard is one shard's answer to shardnear.lua: the players in the period on it, and per probe the players
// ahead, those with a better score, and the neighbours asked for.
type nearShard struct {
	size   int64
	probes []nearProbe
}

type nearProbe struct {
	ahead, better int64
	before, after []shardRow
}

// sizeOf is the players on every shard.
func sizeOf(near []nearShard) int64 {
	var n int64
	for _, sh := range near {
		n += sh.size
	}
	return n
}

// nearOnShards places probes on every shard of window period (w, p) of a sharded board, in one parallel round trip.
func (s *Store) nearOnShards(ctx context.Context, v *cachedBoard, w Window, p string, fields int,
	probes []shardProbe) ([]nearShard, error) {
	args := make([]any, 0, 4+5*len(probes))
	args = append(args, v.b.sum, windowCodes[w], p, fields)
	for _, pr := range probes {
		args = append(args, pr.x, pr.tok, pr.player, pr.nb, pr.na)
	}
	calls := make([]shardCall, len(v.shards))
	for i, base := range v.shards {
		calls[i] = shardCall{shardNearScript, base, args}
	}
	replies, errs := s.onShards(ctx, calls)
	if err := firstError(errs); err != nil {
		return nil, err
	}
	out := make([]nearShard, len(replies))
	for i, r := range replies {
		rows, _ := r.([]any)
		if len(rows) != 1+len(probes) {
			return nil, redisError(fmt.Errorf("shardnear returned %d values for %d probes", len(rows), len(probes)))
		}
		sh := nearShard{size: toInt(rows[0]), probes: make([]nearProbe, len(probes))}
		for j, pv := range rows[1:] {
			parts, _ := pv.([]any)
			if len(parts) != 4 {
				return nil, redisError(fmt.Errorf("shardnear: bad probe reply %T", pv))
			}
			pr := nearProbe{ahead: toInt(parts[0]), better: toInt(parts[1])}
			var err error
			if pr.before, err = parseShardRows(parts[2]); err == nil {
				pr.after, err = parseShardRows(parts[3])
			}
			if err != nil {
				return nil, redisError(err)
			}
			sh.probes[j] = pr
		}
		out[i] = sh
	}
	return out, nil
}

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

// rowsOnShards finds players on their shards (shardrows.lua), in one parallel round trip: by player id, those
// that have a score in window period (w, p).
func (s *Store) rowsOnShards(ctx context.Context, v *cachedBoard, w Window, p string, fields int,
	players []string) (map[string]shardRow, error) {
	byShard := make([][]any, v.b.Shards)
	for _, pl := range players {
		k := ShardOf(pl, v.b.Shards)
		if byShard[k] == nil {
			byShard[k] = []any{v.b.sum, windowCodes[w], p, fields}
		}
		byShard[k] = append(byShard[k], pl)
	}
	var calls []shardCall
	for k, args := range byShard {
		if args != nil {
			calls = append(calls, shardCall{shardRowsScript, v.shards[k], args})
		}
	}
	found := make(map[string]shardRow, len(players))
	if len(calls) == 0 {
		return found, nil
	}
	replies, errs := s.onShards(ctx, calls)
	if err := firstError(errs); err != nil {
		return nil, err
	}
	for _, r := range replies {
		rows, _ := r.([]any)
		if len(rows) == 0 {
			return nil, redisError(fmt.Errorf("shardrows: empty reply"))
		}
		for _, rv := range rows[1:] {
			row, _ := rv.([]any)
			if len(row) != 5 {
				return nil, redisError(fmt.Errorf("shardrows: bad row %v", rv))
			}
			sr := shardRow{player: toString(row[0]), tok: toString(row[1]), xs: toString(row[2]), ts: toInt(row[3]),
				meta: toString(row[4])}
			x, err := strconv.ParseFloat(sr.xs, 64)
			if err != nil {
				return nil, redisError(fmt.Errorf("shardrows: bad score %q", sr.xs))
			}
			sr.x = x
			found[sr.player] = sr
		}
	}
	return found, nil
}

// entryOf is the entry of a row at rank (tie: its tie rank, 0 when not asked) among size players.
func (b *Board) entryOf(r shardRow, rank, tie, size int64) Entry {
	e := Entry{PlayerID: r.player, Rank: rank, TieRank: tie, Score: b.userScore(r.x),
		TopPercent: TopPercent(rank, size)}
	if r.ts != 0 {
		e.UpdatedAt = time.Unix(r.ts, 0).UTC()
	}
	decodeMeta(r.meta, &e)
	return e
}

// shardedRead runs read on a sharded board's view (with the board's cache entry), again when the definition
// changed under it. ok is false when the board is not sharded (or cannot be loaded: the plain path says why).
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
			return errStaleDef
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

// ranksSharded is Ranks on a sharded board: the players found on their shards, then placed on every shard.
func (s *Store) ranksSharded(ctx context.Context, r Resolved, v *cachedBoard, players []string, arg int) (*Page, error) {
	found, err := s.rowsOnShards(ctx, v, r.Window, r.Period, arg&int(FieldUpdatedAt|FieldMeta), players)
	if err != nil {
		return nil, err
	}
	var probes []shardProbe
	var order []shardRow
	for _, pl := range players {
		if row, ok := found[pl]; ok {
			probes = append(probes, shardProbe{x: row.xs, tok: row.tok, player: pl})
			order = append(order, row)
			delete(found, pl) // a player listed twice is answered once
		}
	}
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, 0, probes)
	if err != nil {
		return nil, err
	}
	size := sizeOf(near)
	p := &Page{Board: r.Board.ID, Order: r.Board.Order, Window: r.Window, Period: r.Period, Size: size,
		Entries: make([]Entry, 0, len(order))}
	for j, row := range order {
		var ahead, better int64
		for _, sh := range near {
			ahead += sh.probes[j].ahead
			better += sh.probes[j].better
		}
		tie := int64(0)
		if arg&int(FieldTieRank) != 0 {
			tie = better + 1
		}
		p.Entries = append(p.Entries, r.Board.entryOf(row, ahead+1, tie, size))
	}
	return p, nil
}

// aroundSharded is Around on a sharded board: the player found on its shard, then every shard's 2 * radius
// neighbours either side of it, merged into the window around the player's rank on the whole board.
func (s *Store) aroundSharded(ctx context.Context, r Resolved, v *cachedBoard, player string, radius, arg int) ([]Entry, error) {
	fields := arg & int(FieldUpdatedAt|FieldMeta)
	found, err := s.rowsOnShards(ctx, v, r.Window, r.Period, fields, []string{player})
	if err != nil {
		return nil, err
	}
	me, ok := found[player]
	if !ok {
		return []Entry{}, nil
	}
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, fields,
		[]shardProbe{{x: me.xs, tok: me.tok, player: player, nb: 2 * radius, na: 2 * radius}})
	if err != nil {
		return nil, err
	}
	var at, better int64 // the player's 0-based rank, and the players with a better score
	var before, after []shardRow
	for _, sh := range near {
		pr := sh.probes[0]
		at += pr.ahead
		better += pr.better
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
	size := sizeOf(near)
	start, stop := aroundWindow(at, size, radius)
	slices.SortFunc(before, compareRows)
	slices.SortFunc(after, compareRows)
	rows := make([]shardRow, 0, stop-start+1)
	// The bounds hold for every shard's own moment (each lists min(its players ahead, 2 * radius) before); min
	// only guards a player that moved between the round trips.
	n := min(max(at-start, 0), int64(len(before)))
	start = at - n
	rows = append(rows, before[int64(len(before))-n:]...)
	rows = append(rows, me)
	rows = append(rows, after[:min(max(stop-at, 0), int64(len(after)))]...)
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

// sizeSharded is Size on a sharded board: the players of every shard.
func (s *Store) sizeSharded(ctx context.Context, r Resolved, v *cachedBoard) (int64, error) {
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, 0, nil)
	if err != nil {
		return 0, err
	}
	return sizeOf(near), nil
}
