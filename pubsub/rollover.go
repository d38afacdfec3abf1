package pubsub

import (
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

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
		b.leaveWatch(m.s)
		if old.last != nil {
			b.offerRank(m.s, &leaderboard.Entry{PlayerID: old.key.player, Rank: 0}, t)
		}
		b.attachRank(m.to, m.s, t)
	}
	b.mu.Unlock()
	b.signal()
}
