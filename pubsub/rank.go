package pubsub

import (
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

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
	// at is the board's last change event that last reflects (from the read, then from each change derived),
	// and the window period's size then; zero: unknown, so last is not derived from (derivable).
	at   rankMark
	subs map[*rankSub]struct{}
}

// rankMark names a change event of a board (epoch and version) and a window period's size after it.
type rankMark struct {
	epoch string
	ver   int64
	size  int64
}

// A watched player's entry changes with every other player who passes it, leaves or joins ahead of it, or
// changes the count of strictly better scores: with 10,000 players watching their own ranks and each submission
// taking rank 1, every submission moved every watched rank, and re-reading them all (a Lua call per 100 players,
// 16 us of Redis each on a fast machine) took Redis more time than the submissions. Since the change events
// carry each move's old and new rank and score and the size after it, a watched rank on a board without
// exactTop is derived from them instead, exactly as a read after them would give it; only the watched player's
// own changes are read (and every watch once per Config.RankVerify). On exactTop boards ranks beyond the exact
// tier are estimates that a move elsewhere can change, so those are read whenever a change may move them
// (moved).

// windowPeriod is a window period of the board (a viewKey without the board).
type windowPeriod struct {
	window leaderboard.Window
	period string
}

// viewChanges are one window period's changes of a refresh that are not stale, in order, and what every watch
// asks of them, answered once: the latest version of each player's own change and of a change without scores.
type viewChanges struct {
	changes  []change
	own      map[string]int64
	unscored int64
}

// changeIndex groups a refresh's changes by window period for the watches. Every watch used to go through every
// change comparing window, period and player strings: with 10,000 players watching their own ranks at 1,000
// submissions/s that was about a third of the server's CPU (lbbench rank-watch profile: derivable, derive,
// memeqbody).
type changeIndex map[windowPeriod]*viewChanges

func indexChanges(changes []change) changeIndex {
	ix := changeIndex{}
	for _, c := range changes {
		if c.stale {
			continue
		}
		k := windowPeriod{c.view.window, c.view.period}
		vc := ix[k]
		if vc == nil {
			vc = &viewChanges{own: map[string]int64{}}
			ix[k] = vc
		}
		vc.changes = append(vc.changes, c)
		vc.own[c.player] = max(vc.own[c.player], c.ver)
		if !c.scored {
			vc.unscored = max(vc.unscored, c.ver)
		}
	}
	return ix
}

// view returns the changes of w's window period: nil when there are none.
func (ix changeIndex) view(w *watch) *viewChanges {
	return ix[windowPeriod{w.key.window, w.key.period}]
}

// of returns view(w)'s changes in order.
func (ix changeIndex) of(w *watch) []change {
	if vc := ix.view(w); vc != nil {
		return vc.changes
	}
	return nil
}

// derivable reports whether w can be brought up to date from the changes alone: the board has no exactTop, w was
// read with the event version it reflects (in the board's current epoch), and no change since then is w's own
// player's or comes without scores (an event of an older server).
func (b *board) derivable(w *watch, ix changeIndex) bool {
	if b.sharded || b.def.ExactTop > 0 || w.at.ver == 0 && w.at.epoch == "" || w.at.epoch != b.epoch ||
		w.last != nil && w.last.Approximate {
		return false
	}
	vc := ix.view(w)
	return vc == nil || vc.unscored <= w.at.ver && vc.own[w.key.player] <= w.at.ver
}

// derive applies, in order, the changes after w's mark to its entry: another player's move from rank a to b
// (0: none) takes w's rank r to r1 = r - (0 < a < r), then r1 + (0 < b <= r1); its tie rank loses one if the
// player's old score was strictly better and gains one if its new one is; topPercent follows the size. It
// returns the new entry and whether anything was applied (derivable must have said yes).
func (b *board) derive(w *watch, ix changeIndex) (*leaderboard.Entry, bool) {
	var e leaderboard.Entry
	if w.last != nil {
		e = *w.last
	}
	x := e.Score // the watched score in the index's order, where lower is better
	if b.def.Order == leaderboard.Desc {
		x = -x
	}
	applied, from := false, w.at.ver // an event's changes share its version: compare with the mark before them
	for _, c := range ix.of(w) {
		if c.ver <= from {
			continue
		}
		applied = true
		w.at.ver, w.at.size = c.ver, c.size
		if w.last == nil {
			continue // no score: another player's move changes nothing
		}
		r := e.Rank
		if c.prev > 0 && c.prev < r {
			r--
		}
		if c.n > 0 && c.n <= r {
			r++
		}
		e.Rank = r
		if c.prev > 0 && c.before < x {
			e.TieRank--
		}
		if c.n > 0 && c.after < x {
			e.TieRank++
		}
	}
	if !applied || w.last == nil {
		return w.last, false
	}
	if w.at.size > 0 {
		e.TopPercent = leaderboard.TopPercent(e.Rank, w.at.size)
	}
	b.h.rankDerived.Add(1)
	return &e, true
}

type rankSub struct {
	ch         chan *leaderboard.Entry
	follow     bool
	w          *watch
	queued     int // entries put in ch that may still be there
	stuckSince time.Time
	closed     bool
	stop       func() bool
	notify     func()  // see Hub.SubscribeTopNotify
	end        *Ending // from the subscription's context (WithEnding); nil: none
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

// dropRank ends a rank subscriber whose context ended.
func (b *board) dropRank(s *rankSub) {
	b.mu.Lock()
	b.closeRank(s, "")
	b.mu.Unlock()
	b.signal()
}

// closeRank is the one way a rank subscriber ends: it leaves its watch and its channel is closed. why, when not
// empty, is logged. b.mu is held.
func (b *board) closeRank(s *rankSub, why string) {
	if s.closed {
		return
	}
	b.leaveWatch(s)
	s.closed = true
	close(s.ch)
	if s.notify != nil {
		s.notify()
	}
	if why != "" {
		b.h.cfg.Logger.Warn("pubsub: dropped a rank subscriber", "board", b.def.ID, "why", why)
	}
	if s.stop != nil {
		s.stop()
	}
}

// leaveWatch takes a rank subscriber off its watch; a watch without subscribers goes. b.mu is held.
func (b *board) leaveWatch(s *rankSub) {
	delete(s.w.subs, s)
	if len(s.w.subs) == 0 {
		delete(b.watches, s.w.key)
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
		b.paced(s.notify != nil)
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
		b.h.replaced.Add(uint64(k))
		s.queued -= k
		if s.stuckSince.IsZero() {
			s.stuckSince = now
		} else if now.Sub(s.stuckSince) > b.h.cfg.StuckAfter {
			b.h.stuckDropped.Add(1)
			b.closeRank(s, "it stopped reading")
			return
		}
	}
	c := *e
	b.h.rankUpdates.Add(1) // counted first, as in offer
	s.ch <- &c
	s.queued++
	if s.notify != nil {
		s.notify()
	}
}
