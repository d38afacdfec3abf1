package leaderboard

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The writes of a sharded board (shard.go): creation and deletion on every shard, submissions on the player's shard
// with arrival numbers from the board-wide counter, removal.

var (
	//go:embed arrivals.lua
	arrivalsLua    string
	arrivalsScript = newScript("arrivals", arrivalsLua, false)
	//go:embed shardresult.lua
	shardResultLua    string
	shardResultScript = newScript("shardresult", shardResultLua, false)
)

// createSharded stores a sharded board's definition on every shard, shard 0 (and the board list) last: nobody
// finds the board before all its shards hold the definition. What a deletion or a creation interrupted between its
// shards left is deleted first (clearLeftShards), so that a new board never inherits its players.
// A deletion of the id that shard 0 finds begun meanwhile (LB_DELETING) starts the creation again once: finished
// there, it would delete the shards just written (its tombstone names the old board's shards).
func (s *Store) createSharded(ctx context.Context, b *Board, def string) error {
	bases := s.shardBases(b.ID, b.Shards)
	for attempt := 0; ; attempt++ {
		cur, err := s.clearLeftShards(ctx, b)
		if err != nil {
			return err
		}
		if cur != "" && cur != def {
			return errorf(Conflict, "a board with this id exists with a different definition")
		}
		for _, base := range bases[1:] {
			registry := s.registryOf(slotTag(HashSlot(base)))
			if err := s.createFinishingPurge(ctx, []string{base, registry}, def, b.ID, "shard"); err != nil {
				return err
			}
		}
		err = s.runCreate(ctx, []string{bases[0], s.registryOf(slotTag(HashSlot(bases[0])))}, def, b.ID, "")
		if _, deleting := deletingToken(err); !deleting || attempt == 1 {
			return createError(err)
		}
	}
}

// deleteShard deletes the keys under one shard's key base (shards 1..: shard 0 is the board's, DeleteBoard).
func (s *Store) deleteShard(ctx context.Context, id, base string) error {
	reply, err := s.fns.run(ctx, deleteScript, []string{base, s.registryOf(slotTag(HashSlot(base)))}, id,
		rand.Text(), s.publishArg(), channelOf(base), DeletedNotice).Result()
	if err != nil {
		return redisError(err)
	}
	parts, _ := reply.([]any)
	if len(parts) != 2 {
		return nil // "none"
	}
	token, _ := parts[1].(string)
	return s.purgeBase(context.WithoutCancel(ctx), base, token)
}

// clearLeftShards returns the definition shard 0 of a sharded board about to be created holds; when it holds none,
// it first finishes a deletion still under way (its tombstone on shard 0 names the old board's shards, which
// need not be this board's: finishDeletion), then deletes what a creation interrupted between its shards may have
// left on shards 1.. of this board (deleteShards).
func (s *Store) clearLeftShards(ctx context.Context, b *Board) (string, error) {
	base := s.makeKeyBase(b.ID)
	cur, err := s.rdb.Get(ctx, keyDef.of(base)).Result()
	if errors.Is(err, redis.Nil) {
		token, err := s.rdb.Get(ctx, keyTomb.of(base)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", redisError(err)
		}
		if err == nil {
			if err := s.finishDeletion(ctx, b.ID, token); err != nil {
				return "", err
			}
		}
		return "", s.deleteShards(ctx, b)
	}
	return cur, redisError(err)
}

// deleteShards deletes shards 1.. of a sharded board whose shard 0 has no definition (deleted already, or not yet
// created: what an interrupted deletion or creation left). Nobody reads or writes the board then: every merged read and every
// submission goes through shard 0's definition.
func (s *Store) deleteShards(ctx context.Context, b *Board) error {
	for _, base := range s.shardBases(b.ID, b.Shards)[1:] {
		if err := s.deleteShard(ctx, b.ID, base); err != nil {
			return err
		}
	}
	return nil
}

// arrivalQueue hands out a sharded board's arrival numbers: the submissions that wait while a block is being taken
// share the next one (one arrivals.lua call, one round trip, for all of them), in the order they asked.
type arrivalQueue struct {
	mu      sync.Mutex
	busy    bool
	waiting []*arrivalWait
}

type arrivalWait struct {
	n     int
	first int64
	err   error
	done  chan struct{}
}

// take returns the first of n consecutive arrival numbers of board v.
func (q *arrivalQueue) take(ctx context.Context, s *Store, v *cachedBoard, n int) (int64, error) {
	w := &arrivalWait{n: n, done: make(chan struct{})}
	q.mu.Lock()
	q.waiting = append(q.waiting, w)
	if !q.busy {
		q.busy = true
		go q.serve(s, v)
	}
	q.mu.Unlock()
	select {
	case <-w.done:
		return w.first, w.err
	case <-ctx.Done():
		return 0, &Error{Code: Unavailable, Message: "the data store is unavailable", Err: ctx.Err()}
	}
}

// serve takes blocks for the waiting submissions until none waits. A caller that gave up still gets its numbers
// (unused: a gap, which orders nothing wrongly).
func (q *arrivalQueue) serve(s *Store, v *cachedBoard) {
	for {
		q.mu.Lock()
		batch := q.waiting
		q.waiting = nil
		if len(batch) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		total := 0
		for _, w := range batch {
			total += w.n
		}
		last, err := s.fns.run(context.Background(), arrivalsScript, []string{v.keys}, v.b.sum, total).Int64()
		err = redisError(err)
		next := last - int64(total) + 1
		for _, w := range batch {
			w.first, w.err = next, err
			next += int64(w.n)
			close(w.done)
		}
	}
}

// submitSharded is submitBoardOnce on a sharded board: items are checked, take arrival numbers in input order,
// go to their players' shards (one script call per shard, all in one parallel round trip), and their entries are
// placed on the whole board by a second one (rank = the shard's rank + the players ahead on the other shards).
func (s *Store) submitSharded(ctx context.Context, v *cachedBoard, subs []Submission, idx []int, fields int,
	out []Outcome) error {
	b := v.b
	now := s.cfg.Clock()
	type shardItems struct {
		args     []any
		sent     []int
		periods  []string
		arrivals []int // the places of the items' arrival numbers in args
	}
	byShard := make([]*shardItems, b.Shards)
	var order []int // shards with items, in the order first used
	n := 0
	for _, i := range idx {
		item, period, err := s.appendItem(nil, b, subs[i], now, "")
		if err != nil {
			out[i].Err = err
			continue
		}
		k := ShardOf(subs[i].Player, b.Shards)
		c := byShard[k]
		if c == nil {
			c = &shardItems{args: make([]any, submitHeaderArgs)}
			copy(c.args, v.submitHead)
			c.args[submitChannelArg] = channelOf(v.shards[k])
			byShard[k] = c
			order = append(order, k)
		}
		c.arrivals = append(c.arrivals, len(c.args)+submitArrivalItemArg)
		c.args = append(c.args, item...)
		c.sent = append(c.sent, i)
		c.periods = append(c.periods, period)
		n++
	}
	if n == 0 {
		return nil
	}
	first, err := v.arrivals.take(ctx, s, v, n)
	if err != nil {
		return err
	}
	// The items take their numbers in input order (a shard's items are in input order among themselves).
	next := first
	for _, i := range idx {
		if out[i].Err != nil {
			continue
		}
		c := byShard[ShardOf(subs[i].Player, b.Shards)]
		c.args[c.arrivals[0]] = next
		c.arrivals = c.arrivals[1:]
		next++
	}
	calls := make([]shardCall, len(order))
	for j, k := range order {
		c := byShard[k]
		c.args[submitNowArg], c.args[submitFieldsArg], c.args[submitCountArg] = now.Unix(), scriptFields(fields), len(c.sent)
		calls[j] = shardCall{submitScript, v.shards[k], c.args, nil}
	}
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return err
	}
	replies, errs := s.onShards(ctx, calls)
	release()
	// Each written item's entry on its shard, and the probes that place it on the other shards.
	var done []written
	for j, k := range order {
		c := byShard[k]
		if errs[j] != nil {
			for _, i := range c.sent {
				out[i].Err = errs[j]
			}
			continue
		}
		rows, _ := replies[j].([]any)
		if len(rows) != len(c.sent) {
			err := redisError(fmt.Errorf("submit script returned %d replies for %d items", len(rows), len(c.sent)))
			for _, i := range c.sent {
				out[i].Err = err
			}
			continue
		}
		for m, i := range c.sent {
			if d, ok := shardWritten(b, rows[m], c.periods[m], subs[i].Player, subs[i].EventID, i, k, &out[i]); ok {
				done = append(done, d)
			}
		}
	}
	s.placeWritten(ctx, v, done, fields, out)
	return nil
}

// shardWritten reads a shard's reply row to an item of a submission (index i of the call, the player's, on shard k):
// its outcome when that is final (a refusal, an error, a retry's stored result), else the written item to place on
// the other shards (ok).
func shardWritten(b *Board, reply any, period, player, eventID string, i, k int, out *Outcome) (written, bool) {
	res, err := parseSubmitReply(b, reply, period, player)
	if err != nil || res == nil {
		if err == nil {
			err = &Error{Code: Internal, Message: "internal error"}
		}
		out.Err = err
		return written{}, false
	}
	// The event version is the shard's own counter's, and its event carries the shard's ranks: a listener
	// cannot tell by it whether the merged lists it reads reflect the write (Hub.ChangedAt: 0 is "unknown").
	res.EventEpoch, res.EventVersion = "", 0
	row, _ := reply.([]any)
	if len(row) < 17 {
		out.Err = redisError(fmt.Errorf("sharded submit reply without tokens (%d fields)", len(row)))
		return written{}, false
	}
	if res.Duplicate && len(row) >= 18 && toInt(row[17]) == 1 {
		// A retry whose first result's place on the board was stored (shardresult.lua): that result. Its
		// approximate is the board's too (tailCut), except in records stored before it was: beyond exactTop.
		res.Entry.Approximate = res.Entry.Approximate || b.approxAt(res.Entry.Rank)
		out.Result = res
		return written{}, false
	}
	return written{i: i, shard: k, res: res, tok: toString(row[15]), otok: toString(row[16]), eventID: eventID}, true
}

// placeWritten places the written items of a submission call on the whole board (out[d.i] gets each one's result)
// and stores the first results of those with an eventId in their records, for retries.
func (s *Store) placeWritten(ctx context.Context, v *cachedBoard, done []written, fields int, out []Outcome) {
	b := v.b
	if len(done) == 0 {
		return
	}
	// Place them on the other shards: one shardnear call per shard and window period, with the probes of the
	// items that live elsewhere. The player's own shard counts as its reply says: right after the item, as on a
	// board of one shard. The other shards are counted after the whole call, so each item's counts there are taken
	// back to the moment after the items before it (placeAt).
	type periodKey struct {
		w Window
		p string
	}
	type probeOf struct {
		d   int // index in done
		old bool
	}
	var periods []periodKey
	lists := map[periodKey][][]shardProbe{}
	owners := map[periodKey][][]probeOf{}
	moves := map[periodKey][]map[string][]shardMove{} // per shard, per player: its items' moves in input order
	for di, d := range done {
		pk := periodKey{d.res.Window, d.res.Period}
		if _, ok := lists[pk]; !ok {
			periods = append(periods, pk)
			lists[pk] = make([][]shardProbe, b.Shards)
			owners[pk] = make([][]probeOf, b.Shards)
			moves[pk] = make([]map[string][]shardMove, b.Shards)
		}
		e := d.res.Entry
		if !d.res.Duplicate {
			mv := shardMove{i: d.i, after: &rowPlace{b.userScore(e.Score), d.tok}}
			if d.res.PreviousScore != nil && d.otok != "" {
				mv.before = &rowPlace{b.userScore(*d.res.PreviousScore), d.otok}
			}
			if moves[pk][d.shard] == nil {
				moves[pk][d.shard] = map[string][]shardMove{}
			}
			moves[pk][d.shard][e.PlayerID] = append(moves[pk][d.shard][e.PlayerID], mv)
		}
		if !d.place(fields) {
			continue
		}
		// The player is on none of the other shards: no own member to look for there (player '').
		for k := range b.Shards {
			if k == d.shard {
				continue
			}
			lists[pk][k] = append(lists[pk][k], shardProbe{x: b.internal(e.Score), tok: d.tok})
			owners[pk][k] = append(owners[pk][k], probeOf{d: di})
			if d.placePrev(fields) {
				lists[pk][k] = append(lists[pk][k], shardProbe{x: b.internal(*d.res.PreviousScore), tok: d.otok})
				owners[pk][k] = append(owners[pk][k], probeOf{d: di, old: true})
			}
		}
	}
	for _, pk := range periods {
		var near []nearShard
		var err error
		if slices.ContainsFunc(lists[pk], func(l []shardProbe) bool { return len(l) > 0 }) {
			near, err = s.placeOn(ctx, v, pk.w, pk.p, 0, lists[pk], false)
		}
		if err != nil {
			for _, d := range done {
				if d.res.Window == pk.w && d.res.Period == pk.p {
					out[d.i].Err = err
				}
			}
			continue
		}
		tails := cuts(near)
		ahead, better, prev, size := map[int]int64{}, map[int]int64{}, map[int]int64{}, map[int]int64{}
		for k, sh := range near {
			for j, o := range owners[pk][k] {
				d := done[o.d]
				if o.old {
					at := rowPlace{b.userScore(*d.res.PreviousScore), d.otok}
					n, _, _ := placeAt(moves[pk][k], d.i, at)
					prev[o.d] += sh.probes[j].ahead + n
					continue
				}
				at := rowPlace{b.userScore(d.res.Entry.Score), d.tok}
				n, nb, ns := placeAt(moves[pk][k], d.i, at)
				ahead[o.d] += sh.probes[j].ahead + n
				better[o.d] += sh.probes[j].better + nb
				size[o.d] += sh.size + ns
			}
		}
		for di, d := range done {
			if d.res.Window != pk.w || d.res.Period != pk.p {
				continue
			}
			r := d.res
			if !d.place(fields) {
				// Not asked, and below MaxFirst on its shard: the shard's counts are not the board's.
				r.Entry.Rank, r.Entry.TopPercent, r.Entry.Approximate, r.Entry.TieRank, r.Size = 0, 0, false, 0, 0
				r.PreviousRank = nil
				out[d.i].Result = r
				continue
			}
			r.Entry.Rank += ahead[di]
			// Estimated beyond exactTop, in its shard's tail (its shard's answer), or where another shard's tail
			// may precede it (tailCut).
			r.Entry.Approximate = b.approxAt(r.Entry.Rank) || r.Entry.Approximate ||
				!othersCut(tails, d.shard).holds(b.userScore(r.Entry.Score))
			if r.Entry.TieRank > 0 {
				r.Entry.TieRank += better[di]
			}
			if d.placePrev(fields) {
				pr := *r.PreviousRank + prev[di]
				r.PreviousRank = &pr
			} else {
				r.PreviousRank = nil // the shard's own count, not placed on the others
			}
			r.Size += size[di] // the shard's own size after the item, and the others'
			r.Entry.TopPercent = TopPercent(r.Entry.Rank, r.Size)
			out[d.i].Result = r
		}
	}
	// The first results of items with an eventId go into their records, for retries (one more round trip).
	records := make([][]any, b.Shards)
	for _, d := range done {
		if r := out[d.i].Result; r != nil && d.eventID != "" && !r.Duplicate {
			if records[d.shard] == nil {
				records[d.shard] = []any{b.sum}
			}
			prev := ""
			if r.PreviousRank != nil {
				prev = strconv.FormatInt(*r.PreviousRank, 10)
			}
			approx := 0
			if r.Entry.Approximate {
				approx = 1
			}
			records[d.shard] = append(records[d.shard], d.eventID, r.Entry.Rank, r.Entry.TieRank, r.Size, prev, approx)
		}
	}
	var patches []shardCall
	for k, args := range records {
		if args != nil {
			patches = append(patches, shardCall{shardResultScript, v.shards[k], args, nil})
		}
	}
	if len(patches) > 0 {
		// A record not updated (an error here) leaves a retry its place on the board as it is then.
		s.onShards(ctx, patches)
	}
}

// written is an item of a sharded submission call that its shard applied (or found applied before: Duplicate).
type written struct {
	i       int // its index in the call
	shard   int
	res     *Result // its shard's answer, then its place on the whole board
	tok     string  // the player's arrival token after it, and before it ('': new)
	otok    string
	eventID string
}

// place reports whether the item is placed on the other shards: when the caller asked for its rank (FieldRank, or
// a part that needs it), for an eventId's stored result, or when it may be within the first MaxFirst ranks, now or
// before (placePrev), where a writer's own top lists look at it (graph's changed).
func (d *written) place(fields int) bool {
	return fields&int(FieldRank|FieldTieRank) != 0 || d.eventID != "" || d.res.Entry.Rank <= MaxFirst ||
		d.placePrev(fields)
}

// placePrev reports whether the item's previous place is placed on the other shards too: when the caller asked
// for it (fields), for an eventId's stored result, or when it may have been within the first MaxFirst ranks (the
// board rank is at least the shard's), where a writer's own top lists look at it (graph's changed). Else the
// result has no previous rank.
func (d *written) placePrev(fields int) bool {
	r := d.res
	if r.PreviousRank == nil || r.PreviousScore == nil || d.otok == "" {
		return false
	}
	return fields&int(FieldPreviousRank) != 0 || d.eventID != "" || *r.PreviousRank <= MaxFirst
}

// rowPlace is a place in a sharded board's order: internal score, then arrival token.
type rowPlace struct {
	x   float64
	tok string
}

// shardMove is what an item of a submission call did to its player's place on its shard: before (nil: the player
// was new) and after.
type shardMove struct {
	i             int // the item's index in the call
	before, after *rowPlace
}

// placeAt corrects counts that a shard gave after a whole submission call (the players ahead of at, those with a
// better score, and its size) to the moment after the call's items before item i: byPlayer holds the moves the
// call's items made on that shard. It returns what to add to each count.
func placeAt(byPlayer map[string][]shardMove, i int, at rowPlace) (ahead, better, size int64) {
	for _, mv := range byPlayer {
		final := mv[len(mv)-1].after
		then := mv[0].before // the player's place after the items before i
		for _, m := range mv {
			if m.i >= i {
				break
			}
			then = m.after
		}
		for _, p := range []struct {
			place *rowPlace
			sign  int64
		}{{final, -1}, {then, 1}} {
			if p.place == nil {
				continue
			}
			size += p.sign
			if p.place.x < at.x {
				ahead += p.sign
				better += p.sign
			} else if p.place.x == at.x && p.place.tok < at.tok {
				ahead += p.sign
			}
		}
	}
	return ahead, better, size
}

// internal is a user score as the sorted sets order it (negated on DESC boards), printed for a script.
func (b *Board) internal(score float64) string {
	if b.Order == Desc {
		score = -score
	}
	return strconv.FormatFloat(score, 'g', -1, 64)
}

// removeSharded is RemovePlayer's script call on the player's shard of a sharded board.
func (s *Store) removeSharded(ctx context.Context, v *cachedBoard, args []any, player string) ([]int64, error) {
	base := v.shards[ShardOf(player, v.b.Shards)]
	args[3] = channelOf(base)
	return s.fns.run(ctx, removeScript, []string{base}, args...).Int64Slice()
}
