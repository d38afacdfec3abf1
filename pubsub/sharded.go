package pubsub

import "github.com/leaderboard/leaderboard/leaderboard"

// Sharded boards (leaderboard/shard.go) keep their players on S shards, each a board of its own under its own key
// base: each shard publishes its submissions and removals on its own channel (Store.Channels), numbered by its own
// event counter, and its events carry the shard's ranks and sizes, not the board's. The hub listens on every
// shard's channel and merges them into one view of the board:
//
//   - An event on any shard is news to the board: it is marked dirty at once (Top serves no cached list until a
//     read after the event), and the lists the event may touch are read again through Store.Top, which merges the
//     shards (exact board-wide ranks). A shard's rank is never worse than the board's, so a change that stays below
//     MaxFirst on its shard stays below it on the board (touches holds); one within it on the shard may not be on
//     the board, which costs a read and changes nothing. Reads are coalesced and paced as for any board.
//   - Lost events: each shard's events are checked against that shard's counter (marks, read with every shard's
//     counter before the lists, Store.ShardEventVersions), so a gap, a counter that started again or an
//     undecodable event re-reads everything, as for an unsharded board.
//   - exactTop: each shard keeps the board's exactTop players exact and the lists show the merged exact tier; a
//     player beyond their shard's exact tier is beyond the board's too, so touches holds there as well.
//   - Watched ranks are never derived from the events (their ranks are a shard's): a watched player is read again
//     (Store.Ranks, merged) whenever a change on any shard may have moved them (shardMoved), and the watch key is
//     set on every shard (Store.Watch), so that every shard publishes every change while ranks are watched.
//   - A submission's event version is its shard's, so a sharded board's writes tell Hub.ChangedAt nothing: the
//     writer's own lists are always read again.

// parseSharded is parse for a sharded board: each event is checked against its shard's mark.
func (b *board) parseSharded(msgs []inMsg) (changes []change, all bool) {
	for _, m := range msgs {
		ev, err := leaderboard.DecodeEvent([]byte(m.payload))
		if err != nil || m.shard < 0 || m.shard >= len(b.marks) {
			all = true
			continue
		}
		mk := &b.marks[m.shard]
		switch b.arrive(m.shard, mk.epoch, mk.ver, &ev) {
		case eventGap:
			all = true
		case eventRead:
			// Already read (published before the shard's counter was read with the lists). Its size-only changes
			// still matter: joins right after it may not be announced.
			for _, c := range ev.Changes {
				changes = append(changes, newChange(b.def.ID, ev.Version, c, true))
			}
			continue
		}
		mk.epoch, mk.ver = ev.Epoch, ev.Version
		for _, c := range ev.Changes {
			changes = append(changes, newChange(b.def.ID, ev.Version, c, false))
		}
	}
	return changes, all
}

// shardMoved reports whether a change on a sharded board may have moved a watched player: their own change, a
// change without scores, or another player's whose place relative to the watched score differs before and after
// (strictly better, strictly worse or absent, or equal: equal scores order by arrival, which events do not carry,
// so an equal score on either side counts as a move unless the player kept their score).
func (b *board) shardMoved(ix changeIndex, w *watch) bool {
	vc := ix.view(w)
	if vc == nil {
		return false
	}
	if _, own := vc.own[w.key.player]; own || vc.unscored > 0 {
		return true
	}
	if w.last == nil {
		return false // no score: only their own change gives them one
	}
	if w.last.Approximate {
		return true // beyond exactTop the rank is an estimate from every shard's tail, which any change can move
	}
	x := w.last.Score // in the index's order, where lower is better (as the events' scores)
	if b.def.Order == leaderboard.Desc {
		x = -x
	}
	side := func(present bool, s float64) int {
		switch {
		case !present || s > x:
			return 1
		case s < x:
			return -1
		}
		return 0
	}
	for _, c := range vc.changes {
		if c.prev > 0 && c.n > 0 && c.before == c.after {
			continue // the same score keeps its place (a name or metadata change)
		}
		before, after := side(c.prev > 0, c.before), side(c.n > 0, c.after)
		if before != after || before == 0 {
			return true
		}
	}
	return false
}
