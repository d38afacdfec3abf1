package pubsub

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// view is one board-window-period with its cached top list (view.want deep) and its subscriber groups.
type view struct {
	key     viewKey
	board   *board
	current atomic.Pointer[cachedList] // what Top serves
	used    atomic.Int64               // unix ns of the last Top call
	// cached: kept fresh for Top (changed under Hub.mu; read without it by the refresh, see want).
	cached atomic.Bool

	loaded  bool
	list    []leaderboard.Entry // the top depth ranks (fewer: every rank the board lists)
	depth   int                 // how many ranks the last read asked for
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
	idle     map[*topSub]struct{} // the pulling subscribers not notified (topSub.dirty false): offers go to them
}

type topSub struct {
	ch         chan *TopUpdate
	first      int
	follow     bool
	view       *view
	feed       *feed
	sent       int64   // updates put in ch so far (the Version of the last one)
	base       int64   // feed version the client holds before the updates still in ch (-1: needs a snapshot)
	queued     []int64 // feed version each update still possibly in ch brings the client to
	stuckSince time.Time
	closed     bool
	stop       func() bool
	notify     func()  // see Hub.SubscribeTopNotify; nil: the reader waits on ch
	end        *Ending // from the subscription's context (WithEnding); nil: none
	// pull: the reader pulls its updates (board.pull): offers only notify it, and dirty says it has been
	// notified of a version it has not pulled yet (counted in board.pulls).
	pull  bool
	dirty bool
	// pulledAt is when a pull last put an update in the channel: the next pull that does is one interval
	// (MaxUpdateRate) later at the earliest. notifiedAt is when the subscriber was last notified, and lag how
	// long it then took to pull: it is notified lag before it may pull again, so that it pulls (a writer's round
	// later, at 10,000 screens) about when it may (offer, pull).
	pulledAt, notifiedAt time.Time
	lag                  time.Duration
}

// holds is the feed version the subscriber holds once it has read what is in its channel.
func (s *topSub) holds() int64 {
	if n := len(s.queued); n > 0 {
		return s.queued[n-1]
	}
	return s.base
}

// attachTop adds a top subscriber to a view. b.mu is held.
func (b *board) attachTop(vw *view, s *topSub, now time.Time) {
	f := vw.feeds[s.first]
	if f == nil {
		f = &feed{first: s.first, hist: map[int64][]leaderboard.Entry{}, subs: map[*topSub]struct{}{},
			idle: map[*topSub]struct{}{}}
		vw.feeds[s.first] = f
		if vw.loaded && vw.covers(f.first) {
			b.h.updateFeed(f, vw.list, vw.size)
		} else if vw.loaded {
			b.signal() // the list read is shorter than this feed's: the next refresh reads deeper (want)
		}
	}
	f.subs[s] = struct{}{}
	if s.pull {
		f.idle[s] = struct{}{} // detachTop cleaned it
	}
	s.view, s.feed = vw, f
	b.offer(vw, s, now)
}

// dropTop ends a top subscriber whose context ended.
func (b *board) dropTop(s *topSub) {
	b.mu.Lock()
	b.closeTop(s, "")
	b.mu.Unlock()
	b.signal()
}

// closeTop is the one way a top subscriber ends: it leaves its feed and its channel is closed (the transport then
// completes the subscription). why, when not empty, is logged. b.mu is held.
func (b *board) closeTop(s *topSub, why string) {
	if s.closed {
		return
	}
	b.detachTop(s)
	s.closed = true
	close(s.ch)
	if s.notify != nil {
		s.notify()
	}
	if why != "" {
		b.h.cfg.Logger.Warn("pubsub: dropped a subscriber", "board", b.def.ID, "why", why)
	}
	if s.stop != nil {
		s.stop()
	}
}

func (b *board) detachTop(s *topSub) {
	b.clean(s)
	f := s.feed
	delete(f.subs, s)
	delete(f.idle, s)
	if len(f.subs) == 0 {
		for _, vw := range b.views {
			if vw.feeds[f.first] == f {
				delete(vw.feeds, f.first)
			}
		}
	}
}

// want is how many ranks a refresh of the view reads: MaxFirst when Top serves it (cached), else the longest
// list its subscribers show. A top-100 read costs Redis ~8 times a top-10 read (a record lookup per row), and a
// board watched only by top-10 screens has no use for ranks 11 to 100. b.mu is held.
func (vw *view) want() int {
	if vw.cached.Load() {
		return MaxFirst
	}
	n := 0
	for first := range vw.feeds {
		n = max(n, first)
	}
	if n == 0 {
		return MaxFirst
	}
	return n
}

// covers reports whether the view's list holds ranks 1 .. n as the store would list them. b.mu is held.
func (vw *view) covers(n int) bool { return n <= vw.depth || len(vw.list) < vw.depth }

// apply installs a freshly read list of the top depth ranks in a view and brings its subscribers up to date. A
// feed that joined since the read was planned and shows more than it holds waits for the next read, which the
// view's want asks for. Without wake (a read between two of the board's wakes, see board.wakeDue) the
// subscribers that read their channels are offered only a feed's first version, and wait for the next wake,
// which apply then owes (board.wakeOwed); pulling subscribers are offered every new version (offer keeps their
// pace). b.mu is held.
func (b *board) apply(vw *view, p *leaderboard.Page, depth int, now time.Time, wake bool) {
	vw.loaded, vw.list, vw.size, vw.depth = true, p.Entries, p.Size, depth
	vw.current.Store(&cachedList{entries: p.Entries, depth: depth, size: p.Size, token: listTokens.Add(1)})
	for _, f := range vw.feeds {
		if !vw.covers(f.first) {
			b.signal()
			continue
		}
		was := f.ver
		b.h.updateFeed(f, vw.list, vw.size)
		switch {
		case wake || was == 0:
			b.offerAll(vw, f, now, false)
		case f.ver != was:
			b.wakeOwed = true
			b.offerAll(vw, f, now, true)
		}
	}
}

// offerAll offers a feed's version to each of its subscribers, or (pulling) to the pulling ones not notified
// yet (at 10,000 screens nearly all of them are, waiting for a writer). b.mu is held.
func (b *board) offerAll(vw *view, f *feed, now time.Time, pulling bool) {
	subs := f.subs
	if pulling {
		subs = f.idle
	}
	for s := range subs {
		b.offer(vw, s, now)
		b.paced(s.notify != nil)
	}
}

// paced counts an offer of a fan-out and lets other goroutines run once the offers since the last yield cost
// yieldBudget: an offer that woke the subscriber's goroutine (it reads its channel) costs offerWakes, one that
// only queued the subscriber's connection for the stream writers (notified) costs 1. b.mu is held (subscribers
// read their channels without it).
func (b *board) paced(notified bool) {
	if notified {
		b.offers++
	} else {
		b.offers += offerWakes
	}
	if b.offers >= yieldBudget {
		b.offers = 0
		runtime.Gosched()
	}
}

// fanoutTurn waits for one of the hub's fan-out turns (as many as the Go scheduler has processors) and returns
// the function that gives it back. Boards bring their subscribers up to date a few at a time: a hundred boards
// offering at once woke their subscribers all together, and the yields of one board (paced) could not keep the
// requests' goroutines from waiting behind all of them.
func (h *Hub) fanoutTurn() func() {
	h.fanoutTurns <- struct{}{}
	return func() { <-h.fanoutTurns }
}

// A fan-out lets other goroutines run after every 64 offers that woke a subscriber's goroutine. Each such offer
// wakes a goroutine into this goroutine's run queue; offering to 10,000 at once queued every request's next step
// (the HTTP read, the Redis reply, the response) behind all of them, several times per request. After a yield the woken ones run, and the
// goroutines waiting for the CPU before the yield run before the fan-out goes on.
//
// An offer to a notified subscriber (a websocket stream, written by the stream writers) wakes no goroutine and is
// cheap: yielding as often after those stretches a large fan-out behind the stream writers' turns, and leaves the
// subscribers offered late in it an update staler (BENCHMARKS.md, "offer yields counted by wakes").
const (
	yieldBudget = 1024
	offerWakes  = yieldBudget / 64
)

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

// offer brings one subscriber up to its feed's version: it puts the update in the subscriber's channel
// (deliver), or, for a subscriber that pulls, notifies it once until it has pulled, lag before it may pull
// again (board.deferAt until then). b.mu is held.
func (b *board) offer(vw *view, s *topSub, now time.Time) {
	if !s.pull {
		if b.deliver(vw, s, now) && s.notify != nil {
			s.notify()
		}
		return
	}
	if s.closed || s.dirty || s.feed.ver == 0 || s.holds() == s.feed.ver {
		return
	}
	if next := s.pulledAt.Add(b.h.interval - s.lag); now.Before(next) {
		b.deferTo(next)
		return
	}
	s.dirty, s.notifiedAt = true, now
	delete(s.feed.idle, s)
	b.pulls++
	s.notify()
}

// deferTo asks for the pulling subscribers to be offered their versions again at t (install). b.mu is held.
func (b *board) deferTo(t time.Time) {
	if b.deferAt.IsZero() || t.Before(b.deferAt) {
		b.deferAt = t
	}
}

// pull is a pulling subscriber's read (Hub.SubscribeTopNotify): the feed's newest version goes in its channel if
// it was notified of one since its last pull, and one interval has passed since the last pull that put one
// there (else it is offered again when it has). The first call makes it a pulling subscriber.
func (b *board) pull(s *topSub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := !s.pull
	s.pull = true
	if s.closed {
		return
	}
	if s.dirty || first {
		now := time.Now()
		if s.dirty {
			s.lag = now.Sub(s.notifiedAt)
		}
		b.clean(s)
		if next := s.pulledAt.Add(b.h.interval); !first && now.Before(next) {
			b.deferTo(next)
			b.arm()
		} else if b.deliver(s.view, s, now) {
			s.pulledAt = now
		}
	}
	s.feed.idle[s] = struct{}{}
}

// clean marks a pulling subscriber as not waiting for a pull. b.mu is held.
func (b *board) clean(s *topSub) {
	if s.dirty {
		s.dirty = false
		b.pulls--
	}
}

// deliver brings one subscriber up to its feed's version without ever blocking: when its channel is full, the
// updates it has not read are taken back and replaced by one update from what it holds (a merged diff or a
// snapshot). A subscriber that has read nothing for StuckAfter is dropped. It reports whether it put an update
// in the channel; it notifies nobody. b.mu is held.
func (b *board) deliver(vw *view, s *topSub, now time.Time) bool {
	f := s.feed
	if s.closed || f.ver == 0 {
		return false
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
		return false
	}
	if len(s.ch) == cap(s.ch) {
		k := drain(s.ch)
		b.h.replaced.Add(uint64(k))
		if taken := len(s.queued) - k; taken > 0 {
			s.base = s.queued[taken-1]
			s.stuckSince = time.Time{}
		} else if s.stuckSince.IsZero() {
			s.stuckSince = now
		} else if now.Sub(s.stuckSince) > b.h.cfg.StuckAfter {
			b.h.stuckDropped.Add(1)
			b.closeTop(s, "it stopped reading")
			return false
		}
		s.queued = s.queued[:0]
		s.sent -= int64(k)
		at = s.base
	}
	p := b.h.payloadFrom(f, at)
	// Counted first: the subscriber may have the update, and look at the counters, before this goroutine
	// runs again.
	if p.snapshot {
		b.h.snapshots.Add(1)
	} else {
		b.h.diffs.Add(1)
	}
	s.ch <- &TopUpdate{Board: vw.key.board, Window: vw.key.window, Period: vw.key.period, Version: s.sent + 1,
		Snapshot: p.snapshot, Entries: p.entries, Removed: p.removed, Size: p.size, shared: p}
	s.sent++
	s.queued = append(s.queued, f.ver)
	return true
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
