package pubsub

import "github.com/leaderboard/leaderboard/leaderboard"

// isGone reports whether a read failed because the board was deleted: it is NOT_FOUND and the board's deletion
// notice (leaderboard.DeletedNotice) arrived. NOT_FOUND alone is not enough: a Redis that restarted without its
// data has lost the definition too, and its subscribers stay until the board is created again (as before).
func (b *board) isGone(err error) bool {
	return leaderboard.ErrorCode(err) == leaderboard.NotFound && b.deleted.Load()
}

// vanish ends a board that was deleted (a read found it NOT_FOUND, usually right after the deletion notice
// arrived): every subscriber's channel is closed, which ends the subscriptions (graph then reports NOT_FOUND to
// the clients), and the board and its views leave the hub, so that a board created later with the same id starts
// afresh. Called by the board's loop, which ends after it.
func (b *board) vanish() {
	h := b.h
	h.mu.Lock()
	b.mu.Lock()
	b.closed = true
	if h.boards[b.def.ID] == b {
		delete(h.boards, b.def.ID)
		for _, ch := range b.channels {
			delete(h.byChannel, ch)
		}
	}
	var tops []*topSub
	for k, vw := range b.views {
		if vw.cached.Load() {
			vw.cached.Store(false)
			h.cachedN--
		}
		if h.views[k] == vw {
			delete(h.views, k)
		}
		for _, f := range vw.feeds {
			for s := range f.subs {
				tops = append(tops, s)
			}
		}
	}
	var ranks []*rankSub
	for _, w := range b.watches {
		for s := range w.subs {
			ranks = append(ranks, s)
		}
	}
	for _, s := range tops {
		b.closeTop(s, "")
	}
	for _, s := range ranks {
		b.closeRank(s, "")
	}
	b.mu.Unlock()
	h.mu.Unlock()
	if !h.pollOnly {
		for _, ch := range b.channels {
			h.unlisten(ch)
		}
	}
}
