package pubsub

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// board is one watched board: its inbox of change events, its views and rank watches, and the goroutine (loop)
// that re-reads them from Redis and fans the results out.
type board struct {
	h   *Hub
	def *leaderboard.Board
	// channels are the board's channels (Store.Channels): one, or one per shard of a sharded board, whose events
	// carry that shard's ranks and sizes and are numbered by that shard's counter (see sharded.go). shardOf maps
	// each channel to its shard.
	channels []string
	shardOf  map[string]int
	sharded  bool
	wake     chan struct{} // capacity 1: "there is work"

	dirty     atomic.Bool // cached lists may be out of date: Top must not serve them
	confirmed atomic.Bool // Redis confirmed every channel's subscription and no connection was lost since
	// deleted: the board's deletion notice arrived. The board is retired (nothing new attaches to it, Top serves
	// none of its lists) and its loop ends its subscriptions as deleted (vanish), also when the id was created
	// again meanwhile.
	deleted atomic.Bool

	// seasonCheck asks the loop to look for a new or ended season now (Hub.SeasonChanged). seasonID and
	// seasonRunning are the season seen last (loop only).
	seasonCheck   atomic.Bool
	seasonID      string
	seasonRunning bool

	// The inbox, filled by the Redis reader and emptied by loop.
	inMu     sync.Mutex
	msgs     []inMsg         // raw event payloads
	live     map[string]bool // the channels whose subscription is confirmed (and not lost since)
	all      bool            // re-read every view and watch (lost events, overflow, reconnect)
	snapshot bool            // every subscriber gets a snapshot after the next read (reconnect)
	lists    bool            // re-read every view's list: this process wrote to the board (Hub.Changed)
	// listsFor is the newest change event the writes behind lists went out in (Hub.ChangedAt); nil when one of
	// them did not say (Hub.Changed). Once that event is taken, its changes have had the lists read already.
	listsFor *eventMark

	// mu guards everything below and the fields of views, feeds, watches and subscribers of this board.
	mu      sync.Mutex
	views   map[viewKey]*view
	watches map[watchKey]*watch
	// deletionWatches are the board's watches of its deletion notice (Hub.WatchDeletion): they keep the board,
	// and its channels listened to, like subscriptions.
	deletionWatches map[*DeletionWatch]struct{}
	closed          bool
	epoch           string // epoch of lastVer
	lastVer         int64  // version of the last change event seen (or read with everything); 0: none
	// marks are lastVer and epoch per shard of a sharded board (sharded.go); epoch and lastVer stay empty.
	marks []eventMark
	// arrived is the last change event that arrived per channel (shardOf), whatever was made of it: see eventAt.
	arrived []eventMark
	// taken mirrors epoch and lastVer for ChangedAt, which must not wait for mu (held through a fan-out).
	taken atomic.Pointer[eventMark]
	// listsVer is the event version the lists were read at by the last lists-only read (Hub.Changed), in epoch
	// listsEpoch: events up to it are in the lists (not news to them) but are to the watches.
	listsEpoch string
	listsVer   int64
	lastRead   time.Time
	watchSetAt time.Time
	// rankVerifyAt is when every watched rank is read again (Config.RankVerify), however well the events kept
	// them.
	rankVerifyAt time.Time
	offers       int // the cost of the offers since the fan-out last yielded (paced)
	// pulls counts the pulling subscribers notified of a version they have not pulled yet (topSub.dirty): while
	// there are any, the lists are read more often (readsPerWake), so that what they pull is fresh.
	pulls int
	// lastWake is when the subscribers were last offered every new version (the board's last wake); wakeOwed
	// says that a read since then changed a list they have not been offered (apply), and wakeTimer brings the
	// loop back for that wake (and for deferAt).
	lastWake time.Time
	wakeOwed bool
	// deferAt is the earliest time a pulling subscriber that was not notified of a new version (its last pull
	// was less than an interval ago, see offer) may be; zero: none waits.
	deferAt   time.Time
	wakeTimer *time.Timer
}

// inMsg is an event payload and the shard whose channel it came on.
type inMsg struct {
	payload string
	shard   int
}

// eventMark names a board's change event.
type eventMark struct {
	epoch string
	ver   int64
}

// setLastVer records the last change event taken (epoch and version). b.mu is held.
func (b *board) setLastVer(epoch string, ver int64) {
	b.epoch, b.lastVer = epoch, ver
	b.taken.Store(&eventMark{epoch, ver})
}

// maxInbox bounds the events waiting for one board; beyond it they are dropped and every view is re-read.
const maxInbox = 4096

func (b *board) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// push queues a change event that came on channel (called by the reader).
func (b *board) push(channel, payload string) {
	if payload == leaderboard.DeletedNotice && !b.deleted.Load() {
		// The board is retired at once (see retireLocked): the next subscription or Top of the id reads the
		// definition again and gets a board object of its own, and this one's subscribers end (vanish).
		b.h.noteDeleted(b.def.ID)
		b.deleted.Store(true)
	}
	b.inMu.Lock()
	b.dirty.Store(true) // under inMu, so refresh cannot clear it between this and the queued message
	if len(b.msgs) < maxInbox {
		b.msgs = append(b.msgs, inMsg{payload, b.shardOf[channel]})
	} else {
		b.all = true
	}
	b.inMu.Unlock()
	b.signal()
}

// confirm records that a channel's subscription is live; events before it may have been missed, so everything
// is re-read. The board is confirmed once all its channels are.
func (b *board) confirm(channel string) {
	b.inMu.Lock()
	b.setLive(channel, true)
	b.all = true
	b.inMu.Unlock()
	b.signal()
}

// setLive records whether channel's subscription is live and whether all the board's are. b.inMu is held.
func (b *board) setLive(channel string, live bool) {
	if _, ok := b.shardOf[channel]; !ok {
		return
	}
	if live {
		b.live[channel] = true
	} else {
		delete(b.live, channel)
	}
	b.confirmed.Store(len(b.live) == len(b.channels))
}

// connLost: events of channel may be missing from now on, so whatever is read next goes out as a snapshot.
func (b *board) connLost(channel string) {
	b.inMu.Lock()
	b.setLive(channel, false)
	b.dirty.Store(true)
	b.snapshot = true
	b.inMu.Unlock()
}

func (b *board) connBack(channel string) {
	b.inMu.Lock()
	b.setLive(channel, true)
	b.dirty.Store(true)
	b.all, b.snapshot = true, true
	b.inMu.Unlock()
	b.signal()
}

// loop is the board's goroutine: it waits for work, keeps to MaxUpdateRate, re-reads and fans out, and ends
// when nobody watches the board any more (or at shutdown).
func (b *board) loop() {
	h := b.h
	defer h.wg.Done()
	if !h.pollOnly {
		for _, ch := range b.channels {
			h.listen(ch)
		}
	}
	tick := time.NewTicker(h.cfg.PeriodCheck)
	defer tick.Stop()
	for {
		select {
		case <-h.done:
			b.shutdown()
			return
		case <-b.wake:
			if b.seasonCheck.Swap(false) {
				b.maintain()
			}
		case <-tick.C:
			b.maintain()
		}
		if b.deleted.Load() {
			b.vanish()
			return
		}
		if b.gc() {
			if !h.pollOnly {
				for _, ch := range b.channels {
					h.unlisten(ch)
				}
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
				b.closeTop(s, "")
			}
		}
	}
	for _, w := range b.watches {
		for s := range w.subs {
			b.closeRank(s, "")
		}
	}
	for w := range b.deletionWatches {
		b.endDeletionWatch(w, false)
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
		if vw.cached.Load() && len(vw.feeds) == 0 && vw.used.Load() < idle {
			vw.cached.Store(false) // nobody asked Top for it for ViewIdle
			h.cachedN--
		}
		if len(vw.feeds) == 0 && !vw.cached.Load() {
			delete(b.views, k)
			if h.views[k] == vw {
				delete(h.views, k)
			}
		}
	}
	if len(b.views) > 0 || len(b.watches) > 0 || len(b.deletionWatches) > 0 || h.closed {
		return false
	}
	b.closed = true
	if h.boards[b.def.ID] == b { // else a newer board of the id took over (retireLocked)
		delete(h.boards, b.def.ID)
	}
	for _, ch := range b.channels {
		if h.byChannel[ch] == b {
			delete(h.byChannel, ch)
		}
	}
	return true
}

// change is one element of an event.
type change struct {
	view    viewKey
	player  string
	prev, n int64
	stale   bool  // from an event already reflected in the last full read
	ver     int64 // the event's version
	// scored: the event carries the player's scores before and after (the index's own, ascending is better)
	// and the window period's size after it; watched ranks can then be derived from it (rank.go).
	scored        bool
	before, after float64
	size          int64
}

// Where an event stands against a counter's last version read (eventAt).
const (
	eventNext = iota // the next one
	eventRead        // published before the last full read: in the lists already
	eventGap         // after a lost message, or the counter started again (Redis lost it)
)

// eventAt is the one rule of a counter's events, a board's or a shard's: where ev stands after (epoch, ver), the
// last event taken or read with everything, when arrived is the event that came before it on its channel. An
// epoch's versions arrive in the order they were published, so one not past the event before it means the
// counter went back (Redis failed over to a replica that lagged, keeping the epoch): taken for read, the events
// after the failover would be skipped until a version past the lost ones came.
func eventAt(epoch string, ver int64, arrived eventMark, ev *leaderboard.Event) int {
	switch {
	case ev.Epoch != epoch && (epoch != "" || ver != 0):
		return eventGap
	case ev.Epoch == arrived.epoch && arrived.ver > 0 && ev.Version <= arrived.ver:
		return eventGap
	case ev.Version <= ver:
		return eventRead
	case ev.Version != ver+1:
		return eventGap
	}
	return eventNext
}

// parse decodes the inbox's events. It reports all when something may have been missed: a version gap, a
// counter that started again, an undecodable event. An event older than the last full read (published before
// the version was read with the lists) is already in the lists and is skipped.
func (b *board) parse(msgs []inMsg) (changes []change, all bool) {
	if b.sharded {
		return b.parseSharded(msgs)
	}
	for _, m := range msgs {
		ev, err := leaderboard.DecodeEvent([]byte(m.payload))
		if err != nil {
			all = true
			continue
		}
		switch b.arrive(m.shard, b.epoch, b.lastVer, &ev) {
		case eventGap:
			all = true
		case eventRead:
			// Already read. Its size-only changes still matter: joins right after it may not be announced.
			for _, c := range ev.Changes {
				changes = append(changes, newChange(b.def.ID, ev.Version, c, true))
			}
			continue
		}
		b.setLastVer(ev.Epoch, ev.Version)
		for _, c := range ev.Changes {
			changes = append(changes, newChange(b.def.ID, ev.Version, c, false))
		}
	}
	return changes, all
}

// arrive is eventAt for an event that came on shard's channel, after (epoch, ver); it records the event as the
// channel's last arrival. b.mu is held.
func (b *board) arrive(shard int, epoch string, ver int64, ev *leaderboard.Event) int {
	at := eventAt(epoch, ver, b.arrived[shard], ev)
	b.arrived[shard] = eventMark{ev.Epoch, ev.Version}
	return at
}

func newChange(board string, ver int64, c leaderboard.Change, stale bool) change {
	return change{view: viewKey{board, c.Window, c.Period}, player: c.Player, prev: c.Prev, n: c.Rank, stale: stale,
		ver: ver, scored: c.Scored, before: c.Before, after: c.After, size: c.Size}
}
