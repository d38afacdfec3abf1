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
	notify     func() // see Hub.SubscribeTopNotify
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
