package pubsub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// closeQueue is how many close events may wait unread in a close subscriber's channel; beyond it the subscriber
// misses events (closes are rare: a few a day per board).
const closeQueue = 8

// closeBatch is how many close events one poll of an outbox reads at most.
const closeBatch = 16

// CloseFeed serves subscriptions to the close events of boards (leaderboard.CloseEvent). For every board with
// subscribers one goroutine reads the board's outbox every poll interval (one read, whatever the number of
// subscribers) and hands each event recorded after a subscription started to it. It never blocks on a
// subscriber.
//
// A board's subscriptions end as deleted (their Ending, see WithEnding, says so; graph answers NOT_FOUND) when
// the board is deleted, so that none of them gets the close events of a board created again with the same id:
// at once when the hub receives the board's deletion notice (Hub.WatchDeletion: the hub's rule, which ends its
// own subscriptions of the board), also when the board was created again meanwhile; and, for a notice missed
// (or without a hub), at the next poll that finds the board gone or created again with another definition.
type CloseFeed struct {
	store  *leaderboard.Store
	hub    *Hub // nil: deletions are seen at the polls only
	poll   time.Duration
	log    *slog.Logger
	mu     sync.Mutex
	boards map[string]*closeBoard // the feed of each board id's current board
}

// closeBoard is the feed of one board: one board of an id, from its creation to its deletion (a board created
// again with the same id gets a feed of its own).
type closeBoard struct {
	id    string
	subs  map[chan leaderboard.CloseEvent]*Ending // each subscription's Ending (nil: none)
	ctx   context.Context                         // ends when the feed does
	stop  context.CancelFunc
	watch *DeletionWatch        // the hub's watch of the board's deletion notice (nil without a hub)
	mark  leaderboard.BoardMark // the board's when the feed started
	last  string                // the outbox id the feed starts after
}

// deleted reports whether the hub has the board's deletion notice: no subscription joins the feed any more.
func (cb *closeBoard) deleted() bool { return cb.watch != nil && cb.watch.Deleted() }

// NewCloseFeed returns a feed that reads outboxes every poll (default 1 second) through store. hub, when not nil,
// tells it of deleted boards as soon as their deletion notice arrives (it should read through the same Redis).
func NewCloseFeed(store *leaderboard.Store, hub *Hub, poll time.Duration, log *slog.Logger) *CloseFeed {
	if poll <= 0 {
		poll = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &CloseFeed{store: store, hub: hub, poll: poll, log: log, boards: map[string]*closeBoard{}}
}

// Subscribe returns a channel of the board's close events recorded from now on; it is closed when ctx ends or the
// board is deleted (then the Ending ctx carries, see WithEnding, reports it deleted). An unknown board is a
// NotFound error.
func (f *CloseFeed) Subscribe(ctx context.Context, board string) (<-chan leaderboard.CloseEvent, error) {
	if _, err := f.store.BoardNow(ctx, board); err != nil { // also a board deleted through another server
		return nil, err
	}
	ch := make(chan leaderboard.CloseEvent, closeQueue)
	end := EndingFrom(ctx)
	f.mu.Lock()
	cb := f.boards[board]
	joined := cb != nil && !cb.deleted()
	if joined {
		cb.subs[ch] = end
	}
	f.mu.Unlock()
	if !joined {
		started, err := f.start(ctx, board)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		if cb = f.boards[board]; cb != nil && !cb.deleted() {
			started.stop() // another subscription started the board's feed meanwhile: this one joins it
		} else {
			// A feed of the board's deleted predecessor ends its own subscriptions (follow).
			cb = started
			f.boards[board] = cb
			go f.follow(cb)
		}
		cb.subs[ch] = end
		f.mu.Unlock()
	}
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := cb.subs[ch]; !ok {
			return // ended already: the board was deleted (follow)
		}
		delete(cb.subs, ch)
		close(ch)
		if len(cb.subs) == 0 {
			f.stopLocked(cb)
		}
	})
	return ch, nil
}

// start prepares the feed of the board that exists now: the hub's watch of its deletion first, so that whatever
// is read after it is of the watched board or the notice ends the feed.
func (f *CloseFeed) start(ctx context.Context, board string) (_ *closeBoard, err error) {
	fctx, stop := context.WithCancel(context.Background())
	cb := &closeBoard{id: board, subs: map[chan leaderboard.CloseEvent]*Ending{}, ctx: fctx, stop: stop}
	left := context.AfterFunc(ctx, stop) // the subscriber left meanwhile: the watch ends with the feed's context
	defer func() {
		if !left() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			stop()
		}
	}()
	if f.hub != nil {
		if cb.watch, err = f.hub.WatchDeletion(fctx, board); err != nil {
			return nil, err
		}
	}
	if cb.mark, err = f.store.BoardMarkNow(ctx, board); err != nil {
		return nil, err
	}
	if cb.last, err = f.store.LastCloseID(ctx, board); err != nil {
		return nil, err
	}
	return cb, nil
}

// stopLocked ends a feed without subscribers. f.mu is held.
func (f *CloseFeed) stopLocked(cb *closeBoard) {
	cb.stop()
	if f.boards[cb.id] == cb {
		delete(f.boards, cb.id)
	}
}

// follow reads the board's outbox every poll until the feed ends: when its last subscriber leaves, or when the
// board is deleted (end).
func (f *CloseFeed) follow(cb *closeBoard) {
	t := time.NewTicker(f.poll)
	defer t.Stop()
	var deleted <-chan struct{} // the hub's word
	if cb.watch != nil {
		deleted = cb.watch.Done()
	}
	ctx := cb.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case <-deleted:
			// The deletion notice, or the hub's shutdown: at shutdown the subscriptions end as well, not deleted.
			f.end(cb, cb.watch.Deleted())
			return
		case <-t.C:
		}
		// The events with the board's mark, read at one moment: events of a board created again since the feed
		// started are not handed out, also while the hub's notice of the deletion lags.
		evs, mark, err := f.store.ClosesMarked(ctx, cb.id, cb.last, closeBatch)
		switch {
		case err == nil && mark.RecreatedSince(cb.mark), leaderboard.ErrorCode(err) == leaderboard.NotFound:
			f.end(cb, true)
			return
		case err != nil:
			// UNAVAILABLE: Redis unreachable (its health is reported elsewhere), or the board being restored from
			// the ledger; not gone either way.
			if ctx.Err() == nil && leaderboard.ErrorCode(err) != leaderboard.Unavailable {
				f.log.Warn("close events: reading an outbox", "board", cb.id, "err", err)
			}
			continue
		}
		if len(evs) == 0 {
			continue
		}
		f.mu.Lock()
		if ctx.Err() != nil { // the last subscriber left (stop runs under f.mu)
			f.mu.Unlock()
			return
		}
		if cb.deleted() { // the notice arrived meanwhile: what was read may be the new board's
			f.mu.Unlock()
			f.end(cb, true)
			return
		}
		for _, ev := range evs {
			for ch := range cb.subs {
				select {
				case ch <- ev:
				default:
					f.log.Warn("close events: a subscriber missed an event (queue full)", "board", cb.id)
				}
			}
		}
		f.mu.Unlock()
		cb.last = evs[len(evs)-1].OutboxID
	}
}

// end closes every subscription of a feed, as ended by the board's deletion when deleted, and ends the feed.
func (f *CloseFeed) end(cb *closeBoard, deleted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch, e := range cb.subs {
		if deleted {
			e.markDeleted()
		}
		delete(cb.subs, ch)
		close(ch)
	}
	f.stopLocked(cb)
}
