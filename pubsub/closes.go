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
type CloseFeed struct {
	store  *leaderboard.Store
	poll   time.Duration
	log    *slog.Logger
	mu     sync.Mutex
	boards map[string]*closeBoard
}

type closeBoard struct {
	subs map[chan leaderboard.CloseEvent]struct{}
	stop context.CancelFunc
}

// NewCloseFeed returns a feed that reads outboxes every poll (default 1 second) through store.
func NewCloseFeed(store *leaderboard.Store, poll time.Duration, log *slog.Logger) *CloseFeed {
	if poll <= 0 {
		poll = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &CloseFeed{store: store, poll: poll, log: log, boards: map[string]*closeBoard{}}
}

// Subscribe returns a channel of the board's close events recorded from now on; it is closed when ctx ends. An
// unknown board is a NotFound error.
func (f *CloseFeed) Subscribe(ctx context.Context, board string) (<-chan leaderboard.CloseEvent, error) {
	if _, err := f.store.BoardNow(ctx, board); err != nil { // also a board deleted through another server
		return nil, err
	}
	last, err := f.store.LastCloseID(ctx, board)
	if err != nil {
		return nil, err
	}
	ch := make(chan leaderboard.CloseEvent, closeQueue)
	f.mu.Lock()
	cb := f.boards[board]
	if cb == nil {
		pctx, stop := context.WithCancel(context.Background())
		cb = &closeBoard{subs: map[chan leaderboard.CloseEvent]struct{}{}, stop: stop}
		f.boards[board] = cb
		go f.follow(pctx, board, last)
	}
	cb.subs[ch] = struct{}{}
	f.mu.Unlock()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := cb.subs[ch]; !ok {
			return // ended already: the board was deleted (follow)
		}
		delete(cb.subs, ch)
		close(ch)
		if len(cb.subs) == 0 && f.boards[board] == cb {
			cb.stop()
			delete(f.boards, board)
		}
	})
	return ch, nil
}

// follow reads the board's outbox after id last until ctx ends, or until the board no longer exists (it was
// deleted): then every subscription of it ends (graph reports NOT_FOUND), so none of them gets the events of a
// board created later with the same id.
func (f *CloseFeed) follow(ctx context.Context, board, last string) {
	t := time.NewTicker(f.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		evs, err := f.store.Closes(ctx, board, last, closeBatch)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("close events: reading an outbox", "board", board, "err", err)
			}
			continue
		}
		if len(evs) == 0 {
			if gone, err := f.store.Gone(ctx, board); err == nil && gone {
				f.end(ctx, board)
				return
			}
			continue
		}
		f.mu.Lock()
		if ctx.Err() != nil { // the last subscriber left (stop runs under f.mu)
			f.mu.Unlock()
			return
		}
		cb := f.boards[board]
		for _, ev := range evs {
			for ch := range cb.subs {
				select {
				case ch <- ev:
				default:
					f.log.Warn("close events: a subscriber missed an event (queue full)", "board", board)
				}
			}
		}
		f.mu.Unlock()
		last = evs[len(evs)-1].OutboxID
	}
}

// end closes every subscription of a board that is gone and forgets the board.
func (f *CloseFeed) end(ctx context.Context, board string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil { // the last subscriber left meanwhile
		return
	}
	cb := f.boards[board]
	for ch := range cb.subs {
		delete(cb.subs, ch)
		close(ch)
	}
	cb.stop()
	delete(f.boards, board)
}
