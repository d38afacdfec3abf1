package pubsub

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// board is one watched board: its inbox of change events, its views and rank watches, and the goroutine (loop)
// that re-reads them from Redis and fans the results out.
type board struct {
	h       *Hub
	def     *leaderboard.Board
	channel string
	wake    chan struct{} // capacity 1: "there is work"

	dirty     atomic.Bool // cached lists may be out of date: Top must not serve them
	confirmed atomic.Bool // Redis confirmed the channel subscription and the connection has not been lost since

	// The inbox, filled by the Redis reader and emptied by loop.
	inMu     sync.Mutex
	msgs     []string // raw event payloads
	all      bool     // re-read every view and watch (lost events, overflow, reconnect)
	snapshot bool     // every subscriber gets a snapshot after the next read (reconnect)

	// mu guards everything below and the fields of views, feeds, watches and subscribers of this board.
	mu         sync.Mutex
	views      map[viewKey]*view
	watches    map[watchKey]*watch
	closed     bool
	epoch      string // epoch of lastVer
	lastVer    int64  // version of the last change event seen (or read with the lists); 0: none
	lastRead   time.Time
	watchSetAt time.Time
}

// maxInbox bounds the events waiting for one board; beyond it they are dropped and every view is re-read.
const maxInbox = 4096

func (b *board) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// push queues a change event (called by the reader).
func (b *board) push(payload string) {
	b.inMu.Lock()
	b.dirty.Store(true) // under inMu, so refresh cannot clear it between this and the queued message
	if len(b.msgs) < maxInbox {
		b.msgs = append(b.msgs, payload)
	} else {
		b.all = true
	}
	b.inMu.Unlock()
	b.signal()
}

// confirm records that the channel subscription is live; events before it may have been missed, so everything
// is re-read.
func (b *board) confirm() {
	b.confirmed.Store(true)
	b.inMu.Lock()
	b.all = true
	b.inMu.Unlock()
	b.signal()
}

// connLost: events may be missing from now on, so whatever is read next goes out as a snapshot.
func (b *board) connLost() {
	b.confirmed.Store(false)
	b.inMu.Lock()
	b.dirty.Store(true)
	b.snapshot = true
	b.inMu.Unlock()
}

func (b *board) connBack() {
	b.confirmed.Store(true)
	b.inMu.Lock()
	b.dirty.Store(true)
	b.all, b.snapshot = true, true
	b.inMu.Unlock()
	b.signal()
}

// view is one board-window-period with its cached top MaxFirst list and its subscriber groups.
type view struct {
	key     viewKey
	board   *board
	current atomic.Pointer[cachedList] // what Top serves
	used    atomic.Int64               // unix ns of the last Top call
	cached  bool                       // kept for Top (guarded by Hub.mu)

	loaded  bool
	list    []leaderboard.Entry
	size    int64
	feeds   map[int]*feed // by first
	recheck time.Time     // when to read once more after a size change below the list (zero: no need)
}

// feed is the subscribers of one view with the same `first`: one version history and one diff per version,
// shared by all of them.
type feed struct {
	first    int
	ver      int64
	list     []leaderboard.Entry // the view's list cut to first
	size     int64
	diffSize int64                         // the size sent with version ver (a new size alone makes a new version)
	diff     *payload                      // from ver-1 to ver
	hist     map[int64][]leaderboard.Entry // recent versions' lists, for merged diffs
	merged   map[int64]*payload            // diffs from older versions to ver, computed on demand, once
	snap     *payload                      // snapshot of ver, built on demand, once
	subs     map[*topSub]struct{}
}

type topSub struct {
	ch         chan *TopUpdate
	first      int
	follow     bool
	feed       *feed
	sent       int64   // updates put in ch so far (the Version of the last one)
	base       int64   // feed version the client holds before the updates still in ch (-1: needs a snapshot)
	queued     []int64 // feed version each update still possibly in ch brings the client to
	stuckSince time.Time
	closed     bool
	stop       func() bool
}

type watchKey struct {
	window leaderboard.Window
	period string
	player string
}

// watch is one player's entry in one window period, watched by rank subscribers.
type watch struct {
	key    watchKey
	loaded bool
	dirty  bool
	last   *leaderboard.Entry // nil: no score
	subs   map[*rankSub]struct{}
}

type rankSub struct {
	ch         chan *leaderboard.Entry
	follow     bool
	w          *watch
	queued     int // entries put in ch that may still be there
	stuckSince time.Time
	closed     bool
	stop       func() bool
}

// attachTop adds a top subscriber to a view. b.mu is held.
func (b *board) attachTop(vw *view, s *topSub, now time.Time) {
	f := vw.feeds[s.first]
	if f == nil {
		f = &feed{first: s.first, hist: map[int64][]leaderboard.Entry{}, subs: map[*topSub]struct{}{}}
		vw.feeds[s.first] = f
		if vw.loaded {
			b.h.updateFeed(f, vw.list, vw.size)
		}
	}
	f.subs[s] = struct{}{}
	s.feed = f
	b.offer(vw, s, now)
}

// dropTop removes a top subscriber and closes its channel.
func (b *board) dropTop(s *topSub, stuck bool) {
	b.mu.Lock()
	if !s.closed {
		b.detachTop(s)
		s.closed = true
		close(s.ch)
		if stuck {
			b.h.cfg.Logger.Warn("pubsub: dropped a subscriber that stopped reading", "board", b.def.ID)
		}
		if stuck && s.stop != nil {
			s.stop()
		}
	}
	b.mu.Unlock()
	b.signal()
}

func (b *board) detachTop(s *topSub) {
	f := s.feed
	delete(f.subs, s)
	if len(f.subs) == 0 {
		for _, vw := range b.views {
			if vw.feeds[f.first] == f {
				delete(vw.feeds, f.first)
			}
		}
	}
}

// attachRank adds a rank subscriber to the watch of key. b.mu is held.
func (b *board) attachRank(key watchKey, s *rankSub, now time.Time) {
	w := b.watches[key]
	if w == nil {
		w = &watch{key: key, subs: map[*rankSub]struct{}{}}
		b.watches[key] = w
	}
	w.subs[s] = struct{}{}
	s.w = w
	if w.loaded {
		// Every subscription starts with the player's entry; rank 0 when the player has no score (yet).
		e := w.last
		if e == nil {
			e = &leaderboard.Entry{PlayerID: key.player, Rank: 0}
		}
		b.offerRank(s, e, now)
	}
}

func (b *board) dropRank(s *rankSub, stuck bool) {
	b.mu.Lock()
	if !s.closed {
		delete(s.w.subs, s)
		if len(s.w.subs) == 0 {
			delete(b.watches, s.w.key)
		}
		s.closed = true
		close(s.ch)
		if stuck {
			b.h.cfg.Logger.Warn("pubsub: dropped a rank subscriber that stopped reading", "board", b.def.ID)
		}
		if stuck && s.stop != nil {
			s.stop()
		}
	}
	b.mu.Unlock()
	b.signal()
}

// loop is the board's goroutine: it waits for work, keeps to MaxUpdateRate, re-reads and fans out, and ends
// when nobody watches the board any more (or at shutdown).
func (b *board) loop() {
	h := b.h
	defer h.wg.Done()
	if !h.pollOnly {
		h.listen(b.channel)
	}
	tick := time.NewTicker(h.cfg.PeriodCheck)
	defer tick.Stop()
	for {
		select {
		case <-h.done:
			b.shutdown()
			return
		case <-b.wake:
		case <-tick.C:
			b.maintain()
		}
		if b.gc() {
			if !h.pollOnly {
				h.unlisten(b.channel)
			}
			return
		}
		if !b.refresh() {
			b.shutdown()
			return
		}
		if h.pollOnly {
			b.signal()
		}
	}
}

// shutdown closes every subscriber channel of the board.
func (b *board) shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, vw := range b.views {
		for _, f := range vw.feeds {
			for s := range f.subs {
				s.closed = true
				close(s.ch)
				if s.stop != nil {
					s.stop()
				}
			}
		}
	}
	for _, w := range b.watches {
		for s := range w.subs {
			s.closed = true
			close(s.ch)
			if s.stop != nil {
				s.stop()
			}
		}
	}
}

// gc drops views nobody uses and reports whether the whole board can go (then it is unregistered).
func (b *board) gc() bool {
	h := b.h
	h.mu.Lock()
	defer h.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	idle := time.Now().Add(-h.cfg.ViewIdle).UnixNano()
	for k, vw := range b.views {
		if vw.cached && len(vw.feeds) == 0 && vw.used.Load() < idle {
			vw.cached = false // nobody asked Top for it for ViewIdle
			h.cachedN--
		}
		if len(vw.feeds) == 0 && !vw.cached {
			delete(b.views, k)
			delete(h.views, k)
		}
	}
	if len(b.views) > 0 || len(b.watches) > 0 || h.closed {
		return false
	}
	b.closed = true
	delete(h.boards, b.def.ID)
	delete(h.byChannel, b.channel)
	return true
}

// change is one element of an event.
type change struct {
	view    viewKey
	player  string
	prev, n int64
	stale   bool // from an event already reflected in the last full read
}

// parse decodes the inbox's events. It reports all when something may have been missed: a version gap, a
// counter that started again, an undecodable event. An event older than the last full read (published before
// the version was read with the lists) is already in the lists and is skipped.
func (b *board) parse(msgs []string) (changes []change, all bool) {
	for _, m := range msgs {
		ev, err := leaderboard.DecodeEvent([]byte(m))
		if err != nil {
			all = true
			continue
		}
		switch {
		case ev.Epoch != b.epoch && (b.epoch != "" || b.lastVer != 0):
			all = true // the counter started again (Redis lost it)
		case ev.Version <= b.lastVer:
			// Already read. Its size-only changes still matter: joins right after it may not be announced.
			for _, c := range ev.Changes {
				changes = append(changes, change{viewKey{b.def.ID, c.Window, c.Period}, c.Player, c.Prev, c.Rank, true})
			}
			continue
		case ev.Version != b.lastVer+1:
			all = true // a lost message
		}
		b.epoch, b.lastVer = ev.Epoch, ev.Version
		for _, c := range ev.Changes {
			changes = append(changes, change{viewKey{b.def.ID, c.Window, c.Period}, c.Player, c.Prev, c.Rank, false})
		}
	}
	return changes, all
}

// refresh does one round of work: at most one Redis read per view and one batched read per window period of
// rank watches. It returns false when the hub is shutting down.
func (b *board) refresh() bool {
	h := b.h
	b.mu.Lock()
	wait := time.Until(b.lastRead.Add(h.interval))
	first := b.lastRead.IsZero()
	b.mu.Unlock()
	if wait > 0 && !first {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.done:
			t.Stop()
			return false
		}
	}

	b.inMu.Lock()
	msgs, all, snapshot := b.msgs, b.all, b.snapshot
	b.msgs, b.all, b.snapshot = nil, false, false
	b.inMu.Unlock()
	if h.pollOnly {
		all = true
	}

	b.mu.Lock()
	changes, gap := b.parse(msgs)
	all = all || gap
	var reads []viewKey
	now := time.Now()
	for k, vw := range b.views {
		top, size, settle := touches(changes, k)
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
		if all || !vw.loaded || top || size || due {
			reads = append(reads, k)
		}
	}
	ranks := map[viewKey][]string{}
	for k, w := range b.watches {
		if all || !w.loaded || w.dirty || moved(changes, w) {
			w.dirty = true
			vk := viewKey{b.def.ID, k.window, k.period}
			ranks[vk] = append(ranks[vk], k.player)
		}
	}
	setWatch := len(b.watches) > 0 && time.Since(b.watchSetAt) > h.cfg.RankWatchTTL/3
	if len(reads) > 0 || len(ranks) > 0 {
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
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	failed := false
	if setWatch && !h.pollOnly {
		if err := h.store.Redis().Set(ctx, h.store.WatchKey(b.def.ID), "1", h.cfg.RankWatchTTL).Err(); err != nil {
			failed = true
		} else {
			b.mu.Lock()
			b.watchSetAt = time.Now()
			b.mu.Unlock()
		}
	}
	if all && !h.pollOnly {
		// The version every later event must follow; read before the lists, so nothing falls in between.
		epoch, ver, err := h.store.EventVersion(ctx, b.def.ID)
		if err == nil {
			b.mu.Lock()
			b.epoch, b.lastVer = epoch, ver
			b.mu.Unlock()
		} else {
			failed = true
		}
	}
	pages := make(map[viewKey]*leaderboard.Page, len(reads))
	for _, k := range reads {
		p, err := h.store.Top(ctx, leaderboard.View{Board: k.board, Window: k.window, Period: k.period}, 0, MaxFirst)
		if err != nil {
			failed = true
			h.cfg.Logger.Warn("pubsub: reading a top list failed; retrying", "board", k.board, "err", err)
			continue
		}
		pages[k] = p
	}
	found := map[watchKey]*leaderboard.Entry{}
	readRanks := map[viewKey]bool{}
	for vk, players := range ranks {
		ok := true
		for i := 0; i < len(players); i += leaderboard.MaxFriends {
			chunk := players[i:min(i+leaderboard.MaxFriends, len(players))]
			p, err := h.store.Ranks(ctx, leaderboard.View{Board: vk.board, Window: vk.window, Period: vk.period},
				chunk)
			if err != nil {
				failed, ok = true, false
				h.cfg.Logger.Warn("pubsub: reading ranks failed; retrying", "board", vk.board, "err", err)
				break
			}
			for i := range p.Entries {
				e := p.Entries[i]
				found[watchKey{vk.window, vk.period, e.PlayerID}] = &e
			}
		}
		readRanks[vk] = ok
	}

	now = time.Now()
	b.mu.Lock()
	for k, p := range pages {
		if vw := b.views[k]; vw != nil {
			b.apply(vw, p, now)
		}
	}
	for k, w := range b.watches {
		if w.dirty && readRanks[viewKey{b.def.ID, k.window, k.period}] {
			w.dirty = false
			b.applyRank(w, found[k], now)
		}
	}
	b.mu.Unlock()

	b.inMu.Lock()
	if failed {
		b.all = true
	}
	if len(b.msgs) == 0 && !b.all && b.confirmed.Load() {
		b.dirty.Store(false)
	}
	pending := len(b.msgs) > 0 || b.all
	b.inMu.Unlock()
	if pending {
		if failed { // back off a little more than the rate limit while Redis is unhappy
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

// sizeSettle is how long after a published size change a view is read once more: longer than the scripts' pace
// for size changes below the live top (500 ms), so the last join of a burst is counted.
const sizeSettle = 700 * time.Millisecond

// touches reports whether a new change may have altered the top MaxFirst of view k, whether one changed only its
// size (a join or a removal below the list), and whether any change, new or already read, changed only its size
// (then the joins that followed it closely may not have been announced: settle).
func touches(changes []change, k viewKey) (top, size, settle bool) {
	for _, c := range changes {
		if c.view != k {
			continue
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

// moved reports whether a change may have moved a watched player: their own change, or one whose rank range
// (old to new rank; to the end of the list for arrivals and removals) covers the player's last known rank.
func moved(changes []change, w *watch) bool {
	for _, c := range changes {
		if c.stale || c.view.window != w.key.window || c.view.period != w.key.period {
			continue
		}
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
	}
	return false
}

// apply installs a freshly read list in a view and brings its subscribers up to date. b.mu is held.
func (b *board) apply(vw *view, p *leaderboard.Page, now time.Time) {
	vw.loaded, vw.list, vw.size = true, p.Entries, p.Size
	vw.current.Store(&cachedList{entries: p.Entries, size: p.Size, token: listTokens.Add(1)})
	for _, f := range vw.feeds {
		b.h.updateFeed(f, vw.list, vw.size)
		for s := range f.subs {
			b.offer(vw, s, now)
		}
	}
}

// updateFeed makes list (cut to the feed's first) the feed's next version if it differs from the current one.
func (h *Hub) updateFeed(f *feed, list []leaderboard.Entry, size int64) {
	list = list[:min(len(list), f.first)]
	f.size = size
	if f.ver > 0 {
		changed, removed := Diff(f.list, list)
		if len(changed) == 0 && len(removed) == 0 && size == f.diffSize {
			return
		}
		f.diff = &payload{entries: orEmptyEntries(changed), removed: orEmpty(removed), size: size}
	}
	f.diffSize = size
	f.ver++
	f.list = list
	f.hist[f.ver] = list
	delete(f.hist, f.ver-int64(h.cfg.SnapshotAfter)-1)
	f.merged = nil
	f.snap = nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// payloadFrom returns the shared update that brings a client holding version at to the feed's version.
func (h *Hub) payloadFrom(f *feed, at int64) *payload {
	switch {
	case at == f.ver-1 && at > 0:
		return f.diff
	case at > 0 && f.ver-at <= int64(h.cfg.SnapshotAfter) && f.hist[at] != nil:
		if p := f.merged[at]; p != nil {
			return p
		}
		changed, removed := Diff(f.hist[at], f.list)
		p := &payload{entries: orEmptyEntries(changed), removed: orEmpty(removed), size: f.size}
		if f.merged == nil {
			f.merged = map[int64]*payload{}
		}
		f.merged[at] = p
		return p
	}
	if f.snap == nil {
		f.snap = &payload{snapshot: true, entries: orEmptyEntries(f.list), removed: []string{}, size: f.size}
	}
	return f.snap
}

func orEmptyEntries(s []leaderboard.Entry) []leaderboard.Entry {
	if s == nil {
		return []leaderboard.Entry{}
	}
	return s
}

// offer brings one subscriber up to its feed's version without ever blocking: when its channel is full, the
// updates it has not read are taken back and replaced by one update from what it holds (a merged diff or a
// snapshot). A subscriber that has read nothing for StuckAfter is dropped. b.mu is held.
func (b *board) offer(vw *view, s *topSub, now time.Time) {
	f := s.feed
	if s.closed || f.ver == 0 {
		return
	}
	if c := len(s.queued) - len(s.ch); c > 0 { // the client took c updates since the last offer
		s.base = s.queued[c-1]
		s.queued = append(s.queued[:0], s.queued[c:]...)
		s.stuckSince = time.Time{}
	}
	at := s.base
	if n := len(s.queued); n > 0 {
		at = s.queued[n-1]
	}
	if at == f.ver {
		return
	}
	if len(s.ch) == cap(s.ch) {
		k := drain(s.ch)
		if taken := len(s.queued) - k; taken > 0 {
			s.base = s.queued[taken-1]
			s.stuckSince = time.Time{}
		} else if s.stuckSince.IsZero() {
			s.stuckSince = now
		} else if now.Sub(s.stuckSince) > b.h.cfg.StuckAfter {
			b.detachTop(s)
			s.closed = true
			close(s.ch)
			b.h.cfg.Logger.Warn("pubsub: dropped a subscriber that stopped reading", "board", b.def.ID)
			if s.stop != nil {
				s.stop()
			}
			return
		}
		s.queued = s.queued[:0]
		s.sent -= int64(k)
		at = s.base
	}
	p := b.h.payloadFrom(f, at)
	s.ch <- &TopUpdate{Board: vw.key.board, Window: vw.key.window, Period: vw.key.period, Version: s.sent + 1,
		Snapshot: p.snapshot, Entries: p.entries, Removed: p.removed, Size: p.size, shared: p}
	s.sent++
	s.queued = append(s.queued, f.ver)
}

// resetSub takes back what a subscriber has not read and makes its next update a snapshot. b.mu is held.
func (b *board) resetSub(s *topSub) {
	if s.closed {
		return
	}
	k := drain(s.ch)
	s.sent -= int64(k)
	s.queued = s.queued[:0]
	s.base = -1
}

func drain[T any](ch chan T) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// applyRank records a watched player's freshly read entry (nil: no score) and sends it when it changed.
func (b *board) applyRank(w *watch, e *leaderboard.Entry, now time.Time) {
	first := !w.loaded
	w.loaded = true
	prev := w.last
	w.last = e
	var send *leaderboard.Entry
	switch {
	case e != nil && (first || prev == nil || !sameRow(prev, e)):
		send = e
	case e == nil && (first || prev != nil):
		send = &leaderboard.Entry{PlayerID: w.key.player, Rank: 0}
	}
	if send == nil {
		return
	}
	for s := range w.subs {
		b.offerRank(s, send, now)
	}
}

// offerRank sends an entry to a rank subscriber without blocking: an unread older entry is replaced (entries
// are absolute, so only the newest matters). b.mu is held.
func (b *board) offerRank(s *rankSub, e *leaderboard.Entry, now time.Time) {
	if s.closed {
		return
	}
	if s.queued > len(s.ch) {
		s.queued = len(s.ch)
		s.stuckSince = time.Time{}
	}
	if len(s.ch) == cap(s.ch) {
		k := drain(s.ch)
		s.queued -= k
		if s.stuckSince.IsZero() {
			s.stuckSince = now
		} else if now.Sub(s.stuckSince) > b.h.cfg.StuckAfter {
			delete(s.w.subs, s)
			if len(s.w.subs) == 0 {
				delete(b.watches, s.w.key)
			}
			s.closed = true
			close(s.ch)
			if s.stop != nil {
				s.stop()
			}
			return
		}
	}
	c := *e
	s.ch <- &c
	s.queued++
}

// maintain moves subscriptions that follow the current period to the new period after a rollover.
func (b *board) maintain() {
	h := b.h
	now := h.store.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	b.mu.Lock()
	type move struct {
		s  *topSub
		to viewKey
	}
	var moves []move
	for k, vw := range b.views {
		if k.window == leaderboard.AllTime {
			continue
		}
		cur := b.def.Period(k.window, now)
		if cur == k.period {
			continue
		}
		for _, f := range vw.feeds {
			for s := range f.subs {
				if s.follow {
					moves = append(moves, move{s, viewKey{k.board, k.window, cur}})
				}
			}
		}
	}
	type rmove struct {
		s  *rankSub
		to watchKey
	}
	var rmoves []rmove
	for k, w := range b.watches {
		if k.window == leaderboard.AllTime {
			continue
		}
		if cur := b.def.Period(k.window, now); cur != k.period {
			for s := range w.subs {
				if s.follow {
					rmoves = append(rmoves, rmove{s, watchKey{k.window, cur, k.player}})
				}
			}
		}
	}
	b.mu.Unlock()
	if len(moves) == 0 && len(rmoves) == 0 {
		return
	}
	views := map[viewKey]*view{}
	for _, m := range moves {
		if views[m.to] == nil {
			views[m.to] = h.viewLocked(b, m.to)
		}
	}
	b.mu.Lock()
	t := time.Now()
	for _, m := range moves {
		if m.s.closed {
			continue
		}
		b.detachTop(m.s)
		b.resetSub(m.s)
		b.attachTop(views[m.to], m.s, t)
	}
	for _, m := range rmoves {
		if m.s.closed {
			continue
		}
		old := m.s.w
		delete(old.subs, m.s)
		if len(old.subs) == 0 {
			delete(b.watches, old.key)
		}
		if old.last != nil {
			b.offerRank(m.s, &leaderboard.Entry{PlayerID: old.key.player, Rank: 0}, t)
		}
		b.attachRank(m.to, m.s, t)
	}
	b.mu.Unlock()
	b.signal()
}
