package pubsub

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// isGone reports whether a read failed because the board was deleted: it is NOT_FOUND and the board's deletion
// notice (leaderboard.DeletedNotice) arrived. NOT_FOUND alone is not enough: a Redis that restarted without its
// data has lost the definition too, and its subscribers stay until the board is created again (as before).
func (b *board) isGone(err error) bool {
	return leaderboard.ErrorCode(err) == leaderboard.NotFound && b.deleted.Load()
}

// noteDeleted records that a board's deletion notice arrived (called by the Redis reader, so it never waits
// long): the stores forget the board's definition, so that whatever resolves the id next reads it from Redis
// (it may have been created again, with another definition), and deletions moves on, so that a subscription
// that resolved the id before (with the definition of the deleted board) resolves it again (subscribe).
func (h *Hub) noteDeleted(id string) {
	h.store.Forget(id)
	if h.callerStore != h.store {
		h.callerStore.Forget(id)
	}
	h.deletions.Add(1)
}

// retireLocked takes a deleted board out of the hub: from now on no subscription attaches to it and Top serves
// none of its lists, and the next subscription or Top of the id makes a board object of its own, from the
// definition read again, listening on the new board's channels. Its subscribers stay attached until its loop ends
// them (vanish). Idempotent. h.mu is held.
func (b *board) retireLocked() {
	h := b.h
	if h.boards[b.def.ID] == b {
		delete(h.boards, b.def.ID)
	}
	for _, ch := range b.channels {
		if h.byChannel[ch] == b {
			delete(h.byChannel, ch)
		}
	}
	b.mu.Lock()
	for k, vw := range b.views {
		if vw.cached.Load() {
			vw.cached.Store(false)
			h.cachedN--
		}
		if h.views[k] == vw {
			delete(h.views, k)
		}
	}
	b.mu.Unlock()
	b.signal()
}

// vanish ends a board that was deleted (its deletion notice arrived, see board.deleted): it is retired
// (retireLocked), and every subscriber's channel is closed after its Ending is marked deleted, which ends the
// subscriptions (graph then reports NOT_FOUND to the clients), also when a board of the same id exists again by
// now. Called by the board's loop, which ends after it.
func (b *board) vanish() {
	h := b.h
	h.mu.Lock()
	b.retireLocked()
	b.mu.Lock()
	b.closed = true
	var tops []*topSub
	for _, vw := range b.views {
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
		s.end.markDeleted()
		b.closeTop(s, "")
	}
	for _, s := range ranks {
		s.end.markDeleted()
		b.closeRank(s, "")
	}
	for w := range b.deletionWatches {
		b.endDeletionWatch(w, true)
	}
	b.mu.Unlock()
	h.mu.Unlock()
	if !h.pollOnly {
		for _, ch := range b.channels {
			h.unlisten(ch)
		}
	}
}

// Ending tells why the hub ended a subscription. A subscriber passes one in the context it subscribes with
// (WithEnding); once the subscription's channel is closed, Deleted reports whether the hub ended it because the
// board was deleted (its deletion notice arrived), also when a board of the same id was created again since.
// Other ends (the context, a stuck subscriber, shutdown) leave it false.
type Ending struct{ deleted atomic.Bool }

// Deleted reports whether the subscription was ended by the deletion of its board. Read it after the channel is
// closed: it is set before the close.
func (e *Ending) Deleted() bool { return e != nil && e.deleted.Load() }

func (e *Ending) markDeleted() {
	if e != nil {
		e.deleted.Store(true)
	}
}

type endingKey struct{}

// WithEnding returns ctx carrying e, for SubscribeTop, SubscribeRank and their Notify forms.
func WithEnding(ctx context.Context, e *Ending) context.Context {
	return context.WithValue(ctx, endingKey{}, e)
}

// EndingFrom returns the Ending ctx carries (WithEnding), or nil.
func EndingFrom(ctx context.Context) *Ending {
	e, _ := ctx.Value(endingKey{}).(*Ending)
	return e
}

// DeletionWatch follows a board's deletion notice for a subscriber that the hub does not serve itself (the close
// feed, closes.go), by the hub's rule: the watch ends as deleted when the notice arrives (vanish), also when the
// id was created again before, exactly when the board's topUpdates and rankUpdates subscriptions on this hub end
// so. A watch made after the notice arrived follows the board that exists then. While it lasts the hub listens
// to the board's channels.
type DeletionWatch struct {
	b       *board // nil: the hub hears no deletion notices (its store publishes nothing)
	done    chan struct{}
	once    sync.Once
	deleted atomic.Bool // ended by the board's deletion; set before done is closed
	stop    func() bool // unhooks the watch from its context
}

// Done is closed when the watch ends: the board's deletion (Deleted), its context's end, the hub's shutdown (a
// hub whose store publishes nothing hears no deletions: then only the context ends it).
func (w *DeletionWatch) Done() <-chan struct{} { return w.done }

// Deleted reports whether the board's deletion notice has arrived. It is true as soon as the hub has the notice
// (before Done is closed, once the board's loop ends its subscriptions): from then on, whatever is read of the id
// may be a board created again since, not the watched one.
func (w *DeletionWatch) Deleted() bool {
	return w.deleted.Load() || w.b != nil && w.b.deleted.Load()
}

func (w *DeletionWatch) end(deleted bool) {
	w.once.Do(func() {
		if deleted {
			w.deleted.Store(true)
		}
		close(w.done)
	})
}

// WatchDeletion watches the deletion notice of board id (resolved as a subscription resolves it: a board whose
// notice this hub has taken is read again, so the watch follows the board that exists now) until ctx ends. An
// unknown board is NOT_FOUND; UNAVAILABLE at shutdown.
func (h *Hub) WatchDeletion(ctx context.Context, id string) (*DeletionWatch, error) {
	r, err := h.resolveLock(ctx, leaderboard.View{Board: id})
	if err != nil {
		return nil, err
	}
	w := &DeletionWatch{done: make(chan struct{})}
	if h.pollOnly { // no notices to hear: the watch ends with ctx
		h.mu.Unlock()
		context.AfterFunc(ctx, func() { w.end(false) })
		return w, nil
	}
	b := h.boardLocked(r.Board)
	b.mu.Lock()
	w.b = b
	b.deletionWatches[w] = struct{}{}
	b.mu.Unlock()
	h.mu.Unlock()
	b.signal()
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.endDeletionWatch(w, false)
		b.mu.Unlock()
		b.signal() // its loop ends when nothing else keeps the board (gc)
	})
	b.mu.Lock()
	w.stop = stop
	b.mu.Unlock()
	return w, nil
}

// endDeletionWatch takes a deletion watch off the board and ends it (as deleted or not). b.mu is held.
func (b *board) endDeletionWatch(w *DeletionWatch, deleted bool) {
	if _, ok := b.deletionWatches[w]; !ok {
		return
	}
	delete(b.deletionWatches, w)
	w.end(deleted)
	if w.stop != nil {
		w.stop()
	}
}
