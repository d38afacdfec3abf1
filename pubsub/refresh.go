package pubsub

import (
	"context"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// refresh does one round of work: at most one Redis read per view and one batched read per window period of
// rank watches. It plans what to read (under the board's lock), fetches it (without any lock) and installs the
// results (under the lock again). It returns false when the hub is shutting down or the board was deleted.
func (b *board) refresh() bool {
	h := b.h
	if !b.pace() {
		return false
	}
	p := b.plan()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	r := b.fetch(ctx, p)
	if r.gone || b.deleted.Load() { // what was read may be a board created again since: not this one's

		b.vanish()
		return false
	}
	b.install(r)

	b.inMu.Lock()
	if r.failed {
		b.all = true
	}
	if len(b.msgs) == 0 && !b.all && !b.lists && b.confirmed.Load() {
		b.dirty.Store(false)
	}
	pending := len(b.msgs) > 0 || b.all || b.lists
	b.inMu.Unlock()
	if pending {
		if r.failed { // back off a little more than the rate limit while Redis is unhappy
			select {
			case <-time.After(4 * h.interval):
			case <-h.done:
				return false
			}
		}
		b.signal()
	}
	return true
}

// readsPerWake: while pulling subscribers have been notified of a version and not pulled it yet (their
// connections wait for a stream writer's turn, see board.pulls), a board without rank watches reads its lists up
// to readsPerWake times per MaxUpdateRate interval; its subscribers are still offered new versions once per
// interval (the board's wake), and what a notified one pulls is the newest list read. A stream writer's round over
// many screens is long, and with one read per interval a subscriber got the list as it was when the round began;
// more reads take the writer's and the requests' time (BENCHMARKS.md, "Figures behind constants").
const readsPerWake = 4

// pace waits until MaxUpdateRate allows the next read, or, when the board owes its subscribers a wake (apply),
// until the wake is due and readsPerWake allows a read (install then wakes them, with what it reads or without
// anything new to read); false at shutdown.
func (b *board) pace() bool {
	h := b.h
	for {
		b.mu.Lock()
		fast := b.lastRead.Add(h.interval / readsPerWake)
		readAt := b.lastRead.Add(h.interval)
		if b.pulls > 0 && len(b.watches) == 0 {
			readAt = fast
		}
		if next := b.nextWake(); !next.IsZero() && next.Before(readAt) {
			readAt = next
			if readAt.Before(fast) {
				readAt = fast
			}
		}
		first := b.lastRead.IsZero()
		b.mu.Unlock()
		wait := time.Until(readAt)
		if first || wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.done:
			t.Stop()
			return false
		}
	}
}

// nextWake is when the board owes its subscribers a wake (wakeOwed) or a deferred notification (deferAt), the
// earlier of the two; zero: neither. b.mu is held.
func (b *board) nextWake() time.Time {
	next := b.deferAt
	if at := b.lastWake.Add(b.h.interval); b.wakeOwed && (next.IsZero() || at.Before(next)) {
		next = at
	}
	return next
}

// arm brings the board's loop back when a wake is owed or a pulling subscriber deferred (nextWake). b.mu is held.
func (b *board) arm() {
	next := b.nextWake()
	if next.IsZero() {
		return
	}
	if b.wakeTimer == nil {
		b.wakeTimer = time.AfterFunc(time.Until(next), b.signal)
	} else {
		b.wakeTimer.Reset(time.Until(next))
	}
}

// wakeDue reports whether the subscribers may be offered new versions now: one interval after the last wake.
// b.mu is held.
func (b *board) wakeDue(now time.Time) bool { return !now.Before(b.lastWake.Add(b.h.interval)) }

// wakeOwedViews offers the views' feeds that a read between wakes left unoffered (apply), except the views just
// read (done), and starts the next interval. b.mu is held.
func (b *board) wakeOwedViews(now time.Time, done map[viewKey]pageRead) {
	if b.wakeOwed {
		for k, vw := range b.views {
			if _, ok := done[k]; ok {
				continue
			}
			for _, f := range vw.feeds {
				if vw.covers(f.first) && f.ver > 0 {
					b.offerAll(vw, f, now, false)
				}
			}
		}
	}
	b.wakeOwed = false
	b.lastWake = now
}

// readPlan is what one refresh reads.
type readPlan struct {
	all      bool                 // re-read the event version too (everything may have been missed)
	lists    bool                 // every list is read (Hub.Changed): read the event version the lists follow
	views    []viewRead           // top lists to read
	ranks    map[viewKey][]string // watched players to read, per window period
	setWatch bool                 // refresh the board's watch key
	watched  changeIndex          // the events' changes, for the watched ranks derived from them (install)
}

// plan takes the inbox and decides what to read. It takes b.mu.
func (b *board) plan() readPlan {
	h := b.h
	b.inMu.Lock()
	msgs, all, snapshot, lists, listsFor := b.msgs, b.all, b.snapshot, b.lists, b.listsFor
	b.msgs, b.all, b.snapshot, b.lists, b.listsFor = nil, false, false, false, nil
	b.inMu.Unlock()
	if h.pollOnly {
		all = true
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	changes, gap := b.parse(msgs)
	if lists && listsFor != nil && listsFor.epoch == b.epoch && listsFor.ver <= b.lastVer {
		// The writes' event came first and was taken (by this plan or an earlier one): the lists were read for
		// its changes, or its changes missed them. Hub.ChangedAt could not tell while the event waited unparsed.
		lists = false
	}
	p := readPlan{all: (all || gap) && !h.pollOnly, lists: lists && !h.pollOnly, ranks: map[viewKey][]string{}}
	all = all || gap
	now := time.Now()
	listsAt := int64(0) // the lists reflect every event up to this version (the last lists-only read's)
	if b.listsEpoch == b.epoch && !b.sharded {
		listsAt = b.listsVer
	}
	for k, vw := range b.views {
		top, size, settle := touches(changes, k, listsAt)
		due := !vw.recheck.IsZero() && !now.Before(vw.recheck)
		if due {
			vw.recheck = time.Time{}
		}
		if settle && !top && vw.recheck.IsZero() {
			// Joins below the list are announced at most every half second (see submit.lua): read once more
			// after the joins in between have surely happened.
			vw.recheck = now.Add(sizeSettle)
			time.AfterFunc(sizeSettle, b.signal)
		}
		want := vw.want()
		if all || lists || !vw.loaded || top || size || due || !vw.covers(want) {
			p.views = append(p.views, viewRead{k, want})
		}
	}
	verify := len(b.watches) > 0 && !now.Before(b.rankVerifyAt)
	if verify {
		b.rankVerifyAt = now.Add(h.cfg.RankVerify)
	}
	if len(b.watches) > 0 {
		p.watched = indexChanges(changes)
	}
	for k, w := range b.watches {
		switch {
		case all || verify || !w.loaded || w.dirty:
		case b.sharded:
			if !b.shardMoved(p.watched, w) {
				continue
			}
		case b.derivable(w, p.watched):
			continue // install brings it up to date from the changes
		case !moved(p.watched, w):
			continue
		}
		w.dirty = true
		vk := viewKey{b.def.ID, k.window, k.period}
		p.ranks[vk] = append(p.ranks[vk], k.player)
	}
	p.setWatch = len(b.watches) > 0 && time.Since(b.watchSetAt) > h.cfg.RankWatchTTL/3 && !h.pollOnly
	if len(p.views) > 0 || len(p.ranks) > 0 {
		b.lastRead = now
	}
	if snapshot {
		for _, vw := range b.views {
			for _, f := range vw.feeds {
				for s := range f.subs {
					b.resetSub(s)
				}
			}
		}
	}
	return p
}

// viewRead is one top list to read: the view's top depth ranks.
type viewRead struct {
	key   viewKey
	depth int
}

// pageRead is a top list read, with the depth it was read to.
type pageRead struct {
	page  *leaderboard.Page
	depth int
}

// readResult is what one refresh read.
type readResult struct {
	failed   bool
	gone     bool // the board was deleted (see vanish)
	version  bool // epoch and ver were read
	all      bool // ... for a read of everything (else for the lists only)
	epoch    string
	ver      int64
	watchSet time.Time // when the watch key was set (zero: not)
	pages    map[viewKey]pageRead
	found    map[watchKey]*leaderboard.Entry
	readAt   map[watchKey]rankMark // the change event each watched player's read reflects
	ranks    map[viewKey]bool      // window periods whose watched players were all read
	watched  changeIndex           // the plan's
	marks    []eventMark           // a sharded board's shards' counters, read for a read of everything
}

// fetch reads what p asks for. It holds no lock.
func (b *board) fetch(ctx context.Context, p readPlan) readResult {
	h := b.h
	r := readResult{pages: make(map[viewKey]pageRead, len(p.views)), found: map[watchKey]*leaderboard.Entry{},
		readAt: map[watchKey]rankMark{}, ranks: map[viewKey]bool{}, watched: p.watched}
	if p.setWatch {
		if err := h.store.Watch(ctx, b.def.ID, h.cfg.RankWatchTTL); err != nil {
			r.failed = true
		} else {
			r.watchSet = time.Now()
		}
	}
	if b.sharded {
		if p.all {
			// Every shard's version its later events must follow; read before the lists, as below.
			epochs, vers, err := h.store.ShardEventVersions(ctx, b.def)
			if err == nil && len(vers) == len(b.channels) {
				r.marks = make([]eventMark, len(vers))
				for i := range vers {
					r.marks[i] = eventMark{epochs[i], vers[i]}
				}
			} else {
				r.failed = true
			}
		}
	} else if p.all || p.lists {
		// The version every later event must follow; read before the lists, so nothing falls in between.
		epoch, ver, err := h.store.EventVersion(ctx, b.def.ID)
		if err == nil {
			r.version, r.all, r.epoch, r.ver = true, p.all, epoch, ver
		} else if p.all {
			r.failed = true
		}
	}
	for _, vr := range p.views {
		k := vr.key
		page, err := h.store.Top(ctx, leaderboard.View{Board: k.board, Window: k.window, Period: k.period}, 0, vr.depth)
		if b.isGone(err) {
			r.gone = true
			return r
		}
		if err != nil {
			r.failed = true
			h.cfg.Logger.Warn("pubsub: reading a top list failed; retrying", "board", k.board, "err", err)
			continue
		}
		h.listRows.Add(uint64(len(page.Entries)))
		r.pages[k] = pageRead{page, vr.depth}
	}
	for vk, players := range p.ranks {
		ok := true
		for i := 0; i < len(players); i += h.cfg.RankReadBatch {
			chunk := players[i:min(i+h.cfg.RankReadBatch, len(players))]
			page, err := h.store.Ranks(ctx, leaderboard.View{Board: vk.board, Window: vk.window, Period: vk.period},
				chunk, leaderboard.WithVersion())
			if b.isGone(err) {
				r.gone = true
				return r
			}
			if err != nil {
				r.failed, ok = true, false
				h.cfg.Logger.Warn("pubsub: reading ranks failed; retrying", "board", vk.board, "err", err)
				break
			}
			for i := range page.Entries {
				e := page.Entries[i]
				r.found[watchKey{vk.window, vk.period, e.PlayerID}] = &e
			}
			h.rankReads.Add(uint64(len(chunk)))
			if page.Versioned {
				for _, player := range chunk {
					r.readAt[watchKey{vk.window, vk.period, player}] = rankMark{page.Epoch, page.Version, page.Size}
				}
			}
		}
		r.ranks[vk] = ok
	}
	return r
}

// install brings views, watches and their subscribers up to what was read. It takes b.mu.
func (b *board) install(r readResult) {
	now := time.Now()
	release := b.h.fanoutTurn()
	defer release()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !r.watchSet.IsZero() {
		b.watchSetAt = r.watchSet
	}
	if r.marks != nil {
		b.marks = r.marks
	}
	switch {
	case r.version && r.all:
		b.setLastVer(r.epoch, r.ver)
		b.listsEpoch, b.listsVer = "", 0
	case r.version:
		// Only the lists were read (the watched ranks were not): the events up to this version are in the lists,
		// but still news to the watches.
		b.listsEpoch, b.listsVer = r.epoch, r.ver
	}
	wake := b.wakeDue(now)
	for k, p := range r.pages {
		if vw := b.views[k]; vw != nil {
			b.apply(vw, p.page, p.depth, now, wake)
		}
	}
	if wake && (len(r.pages) > 0 || b.wakeOwed) {
		b.wakeOwedViews(now, r.pages)
	}
	if !b.deferAt.IsZero() && !now.Before(b.deferAt) {
		// Pulling subscribers that were too early for a new version: offered again (those still too early set
		// deferAt again).
		b.deferAt = time.Time{}
		for _, vw := range b.views {
			for _, f := range vw.feeds {
				if vw.covers(f.first) && f.ver > 0 {
					b.offerAll(vw, f, now, true)
				}
			}
		}
	}
	b.arm()
	for k, w := range b.watches {
		switch {
		case w.dirty && r.ranks[viewKey{b.def.ID, k.window, k.period}]:
			w.dirty = false
			w.at = r.readAt[k] // zero (unknown) for a read without the version: not derived from until read again
			b.applyRank(w, r.found[k], now)
		case !w.dirty && w.loaded && b.derivable(w, r.watched):
			if e, ok := b.derive(w, r.watched); ok {
				b.applyRank(w, e, now)
			}
		}
	}
}

// sizeSettle is how long after a published size change a view is read once more: longer than the scripts' pace
// for size changes below the live top (500 ms), so the last join of a burst is counted.
const sizeSettle = 700 * time.Millisecond

// touches reports whether a new change may have altered the top MaxFirst of view k, whether one changed only its
// size (a join or a removal below the list), and whether any change, new or already read, changed only its size
// (then the joins that followed it closely may not have been announced: settle).
func touches(changes []change, k viewKey, listsAt int64) (top, size, settle bool) {
	for _, c := range changes {
		if c.view != k {
			continue
		}
		if c.ver <= listsAt {
			c.stale = true // in the lists read since (a lists-only read: the watches still take it)
		}
		sizeOnly := !(c.prev > 0 && c.prev <= MaxFirst || c.n > 0 && c.n <= MaxFirst) && (c.prev == 0 || c.n == 0)
		settle = settle || sizeOnly
		if c.stale {
			continue
		}
		if sizeOnly {
			size = true
		} else if c.prev > 0 && c.prev <= MaxFirst || c.n > 0 && c.n <= MaxFirst {
			top = true
		}
	}
	return top, size, settle
}

// moved reports whether a change may have moved a watched player: their own change, one whose rank range (old
// to new rank; to the end of the list for arrivals and removals) covers the player's last known rank, or one of
// a player ranked between the watched player's tieRank and rank (an earlier arrival with the same score: when it
// climbs, the watched player's tieRank changes and its rank does not).
func moved(ix changeIndex, w *watch) bool {
	for _, c := range ix.of(w) {
		if c.player == w.key.player {
			return true
		}
		if w.last == nil {
			continue
		}
		if w.last.Approximate {
			return true
		}
		lo, hi := min(c.prev, c.n), max(c.prev, c.n)
		if c.prev == 0 || c.n == 0 {
			lo, hi = max(c.prev, c.n), 1<<62
		}
		if w.last.Rank >= lo && w.last.Rank <= hi+1 {
			return true
		}
		if c.prev >= w.last.TieRank && c.prev < w.last.Rank {
			return true
		}
	}
	return false
}
