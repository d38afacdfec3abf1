package pubsub

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Hub is a process's live fan-out: the Redis listener, the per-board refreshers, the views' cached top lists and
// the local subscribers. It is safe for concurrent use. Subscriptions work from New on; Run shuts everything
// down when its context ends.
type Hub struct {
	store       *leaderboard.Store // the hub's own reads (coalesced refreshes)
	callerStore *leaderboard.Store // reads on behalf of Top's callers (Config.CallerStore)
	cfg         Config
	pollOnly    bool // the store publishes nothing: refreshers poll at MaxUpdateRate while anybody watches
	interval    time.Duration

	ctx    context.Context // ends at shutdown; used for the hub's own Redis calls
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup // board loops and connection readers

	// mu guards the maps below and view.cached. Lock order: mu, then a board's mu.
	mu        sync.RWMutex
	closed    bool
	boards    map[string]*board
	byChannel map[string]*board
	views     map[viewKey]*view
	cachedN   int // views with cached set
	// deletions counts the deletion notices received (noteDeleted): a definition resolved before one may be of
	// a deleted board (resolveLock).
	deletions atomic.Uint64

	listenMu sync.Mutex               // serializes (un)subscribing; guards conns, chanConn and retry
	conns    map[string]*listenConn   // by node (listenConn.key)
	chanConn map[string]*listenConn   // the connection each listened channel is on
	retry    map[string]time.Duration // node -> how long its next reopen waits (Hub.reopenLocked)

	running atomic.Bool

	fanoutTurns chan struct{} // see fanoutTurn

	snapshots, diffs, rankUpdates, replaced, stuckDropped, listRows atomic.Uint64 // see Stats
	rankReads, rankDerived                                          atomic.Uint64
}

// Stats are counts since the hub started, for metrics: the health of the fan-out.
type Stats struct {
	Snapshots   uint64 // top-list updates sent as a whole list (first updates, rollovers, subscribers far behind)
	Diffs       uint64 // top-list updates sent as diffs (merged ones included)
	RankUpdates uint64 // rank-subscription updates sent
	// Replaced counts unread updates taken back from subscribers that fell behind, replaced by a merged diff or a
	// snapshot (top lists) or by the newer entry (ranks).
	Replaced uint64
	// StuckDropped counts subscribers dropped for reading nothing for Config.StuckAfter.
	StuckDropped uint64
	// ListRows counts the entries the hub's refreshes read from Redis for top lists (each list is read as deep
	// as its subscribers show, MaxFirst when Top serves it).
	ListRows uint64
	// RankReads counts watched players' entries read from Redis; RankDerived those brought up to date from the
	// change events alone (another player's move shifts a watched rank; see rank.go).
	RankReads, RankDerived uint64
}

// Stats returns the hub's counts so far.
func (h *Hub) Stats() Stats {
	return Stats{Snapshots: h.snapshots.Load(), Diffs: h.diffs.Load(), RankUpdates: h.rankUpdates.Load(),
		Replaced: h.replaced.Load(), StuckDropped: h.stuckDropped.Load(), ListRows: h.listRows.Load(),
		RankReads: h.rankReads.Load(), RankDerived: h.rankDerived.Load()}
}

type viewKey struct {
	board  string
	window leaderboard.Window
	period string
}

// New returns a Hub over store. Call Run (once) to stop it cleanly later.
func New(store *leaderboard.Store, cfg Config) *Hub {
	cfg.normalize()
	caller := cfg.CallerStore
	if caller == nil {
		caller = store
	}
	h := &Hub{store: store, callerStore: caller, cfg: cfg,
		pollOnly: store.PublishCommand() == leaderboard.PublishNone,
		interval: time.Duration(float64(time.Second) / cfg.MaxUpdateRate),
		done:     make(chan struct{}), boards: map[string]*board{}, byChannel: map[string]*board{},
		views: map[viewKey]*view{}, conns: map[string]*listenConn{},
		chanConn: map[string]*listenConn{}, retry: map[string]time.Duration{}}
	h.fanoutTurns = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Run keeps the hub until ctx is done, then closes every subscription channel and Redis subscription and waits
// for the hub's goroutines to end. It returns nil after a normal shutdown.
func (h *Hub) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return &leaderboard.Error{Code: leaderboard.Internal, Message: "internal error"}
	}
	<-ctx.Done()
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	close(h.done)
	h.cancel()
	h.listenMu.Lock()
	for _, lc := range h.conns {
		_ = lc.ps.Close()
	}
	h.listenMu.Unlock()
	h.wg.Wait()
	return nil
}

func (h *Hub) isClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

var errClosed = &leaderboard.Error{Code: leaderboard.Unavailable, Message: "the server is shutting down"}

// resolveLock resolves v and returns with h.mu held (unless it fails). A definition resolved while a deletion
// notice arrived may be the deleted board's (the store's cache; noteDeleted makes the stores forget it): then v is
// resolved again, so that the subscription's board object is made from the current definition. A few tries at
// most (deletions of other boards count too); boardLocked retires a deleted board whatever happens.
func (h *Hub) resolveLock(ctx context.Context, v leaderboard.View) (leaderboard.Resolved, error) {
	for try := 0; ; try++ {
		gen := h.deletions.Load()
		r, err := h.store.Resolve(ctx, v)
		if err != nil {
			return r, err
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return r, errClosed
		}
		if h.deletions.Load() == gen || try == 3 {
			return r, nil
		}
		h.mu.Unlock()
	}
}

// SubscribeTop subscribes to the top first (1..MaxFirst) entries of a view. The first message is a snapshot
// (Version 1), sent as soon as the list is known; then diffs follow at most MaxUpdateRate per second. With
// v.Period empty the subscription follows the current period and gets a snapshot of the new period at each
// rollover. The channel is closed when ctx is done, when the subscriber stays stuck (see Config.StuckAfter) and
// at shutdown. Errors are *leaderboard.Error (BAD_USER_INPUT, NOT_FOUND, UNAVAILABLE).
func (h *Hub) SubscribeTop(ctx context.Context, v leaderboard.View, first int) (<-chan *TopUpdate, error) {
	ch, _, err := h.SubscribeTopNotify(ctx, v, first, nil)
	return ch, err
}

// SubscribeTopNotify is SubscribeTop for a reader that does not wait on the channel: notify (when not nil) is
// called after each update is put in the channel and after the channel is closed, from the hub's goroutines
// and with the board's lock held, so it must return at once (schedule the read, never do it).
//
// With notify, pull lets the reader take its updates when it gets to them rather than when they are read from
// Redis. Once the first update has been read from the channel, the reader may call pull before each read: from
// the first call on, notify says that a newer version exists (once, until the next pull), and pull puts the
// newest version read in the channel, as one update from what the reader holds (a diff, merged or not, or a
// snapshot). A reader that gets to its updates late (10,000 connections waiting for a writer) then gets the
// list as the board's last read found it, not as it was when it was notified; it still gets at most
// MaxUpdateRate updates per second.
func (h *Hub) SubscribeTopNotify(ctx context.Context, v leaderboard.View, first int, notify func()) (
	_ <-chan *TopUpdate, pull func(), _ error) {
	if first < 1 || first > MaxFirst {
		return nil, nil, &leaderboard.Error{Code: leaderboard.Invalid,
			Message: fmt.Sprintf("first must be between 1 and %d for live updates", MaxFirst)}
	}
	r, err := h.resolveLock(ctx, v)
	if err != nil {
		return nil, nil, err
	}
	s := &topSub{ch: make(chan *TopUpdate, h.cfg.QueueSize), first: first, follow: v.Period == "", base: -1,
		notify: notify, end: EndingFrom(ctx)}
	key := viewKey{r.Board.ID, r.Window, r.Period}
	b := h.boardLocked(r.Board)
	vw := h.viewLocked(b, key)
	b.mu.Lock()
	b.attachTop(vw, s, time.Now())
	b.mu.Unlock()
	h.mu.Unlock()
	b.signal()
	stop := context.AfterFunc(ctx, func() { b.dropTop(s) })
	b.mu.Lock()
	s.stop = stop
	b.mu.Unlock()
	if notify != nil {
		pull = func() { b.pull(s) }
	}
	return s.ch, pull, nil
}

// SubscribeRank subscribes to one player's entry in a view: the entry at once, then each time their rank or
// score changes, also when others overtake them. An Entry with Rank 0 means "no score": as the first message
// when the player has none yet, later when the player is removed or a followed period rolls over. With v.Period empty it follows the current period. Channel and errors as for SubscribeTop.
func (h *Hub) SubscribeRank(ctx context.Context, v leaderboard.View, player string) (<-chan *leaderboard.Entry,
	error) {
	return h.SubscribeRankNotify(ctx, v, player, nil)
}

// SubscribeRankNotify is SubscribeRank with notify, as SubscribeTopNotify.
func (h *Hub) SubscribeRankNotify(ctx context.Context, v leaderboard.View, player string,
	notify func()) (<-chan *leaderboard.Entry, error) {
	r, err := h.resolveLock(ctx, v)
	if err != nil {
		return nil, err
	}
	if len(player) == 0 || len(player) > leaderboard.MaxIDBytes {
		h.mu.Unlock()
		return nil, &leaderboard.Error{Code: leaderboard.Invalid,
			Message: fmt.Sprintf("player id must be 1 to %d bytes", leaderboard.MaxIDBytes)}
	}
	s := &rankSub{ch: make(chan *leaderboard.Entry, h.cfg.QueueSize), follow: v.Period == "", notify: notify,
		end: EndingFrom(ctx)}
	b := h.boardLocked(r.Board)
	b.mu.Lock()
	b.attachRank(watchKey{r.Window, r.Period, player}, s, time.Now())
	b.mu.Unlock()
	h.mu.Unlock()
	b.signal()
	stop := context.AfterFunc(ctx, func() { b.dropRank(s) })
	b.mu.Lock()
	s.stop = stop
	b.mu.Unlock()
	return s.ch, nil
}

// Top returns ranks offset+1 .. offset+first like Store.Top. Pages within the cached list of a view that the
// hub watches come from memory (no Redis round trip) as long as no change event is pending for the board; any
// other request reads Redis and starts caching its view (at most CacheSize views, least recently used dropped).
func (h *Hub) Top(ctx context.Context, v leaderboard.View, offset, first int) (*leaderboard.Page, error) {
	if first < 0 || offset < 0 || offset+first > MaxFirst {
		return h.callerStore.Top(ctx, v, offset, first)
	}
	gen := h.deletions.Load()
	r, err := h.store.Resolve(ctx, v)
	if err != nil {
		return nil, err
	}
	key := viewKey{r.Board.ID, r.Window, r.Period}
	h.mu.RLock()
	vw := h.views[key]
	h.mu.RUnlock()
	if vw != nil {
		vw.used.Store(time.Now().UnixNano())
		if c := vw.current.Load(); c != nil && vw.serves() && c.covers(offset+first) {
			return c.page(r, offset, first), nil
		}
	}
	p, err := h.callerStore.Top(ctx, v, offset, first)
	if err == nil && (vw == nil || !vw.cached.Load()) {
		h.cacheView(r.Board, key, gen) // a view only subscriptions kept is read MaxFirst deep from now on (view.want)
	}
	return p, err
}

// TopToken identifies the list Top would serve from memory for ranks offset+1 .. offset+first of v right now:
// the token changes whenever that view's cached list is replaced, and is never reused for another list or view
// in this process. ok is false whenever Top would read Redis instead (a range beyond MaxFirst, a view that is not
// cached yet, a board with a change pending, an unknown board). A caller may keep what it rendered from Top under
// the token and reuse it while TopToken returns the same token. It counts as a use of the view, like Top.
func (h *Hub) TopToken(ctx context.Context, v leaderboard.View, offset, first int) (token uint64, ok bool) {
	if first < 0 || offset < 0 || offset+first > MaxFirst {
		return 0, false
	}
	r, err := h.store.Resolve(ctx, v)
	if err != nil {
		return 0, false
	}
	h.mu.RLock()
	vw := h.views[viewKey{r.Board.ID, r.Window, r.Period}]
	h.mu.RUnlock()
	if vw == nil {
		return 0, false
	}
	vw.used.Store(time.Now().UnixNano())
	if c := vw.current.Load(); c != nil && vw.serves() && c.covers(offset+first) {
		return c.token, true
	}
	return 0, false
}

// Changed tells the hub that this process just wrote to a board, so that Top stops serving the board's cached
// lists until they have been re-read (read-your-writes for the writer, even before the change event arrives).
// Optional: change events alone keep everything correct within milliseconds. Only the lists are re-read for it:
// watched ranks follow the change events (re-reading them all for every write of the process took Redis more
// time than the writes when thousands of players watched their ranks).
func (h *Hub) Changed(board string) { h.ChangedAt(board, "", 0) }

// WaitDeleted waits until the hub has taken a board's deletion (its deletion notice, which Store.DeleteBoard
// publishes), when it watches the board, at most until ctx ends: a subscription that this process makes after the
// deletion, and after the id is created again, then never joins the deleted board's state, which the notice would
// end with NOT_FOUND when it arrives. At once when the hub does not watch the board.
func (h *Hub) WaitDeleted(ctx context.Context, id string) {
	tick := time.NewTicker(2 * time.Millisecond) // the notice comes over pub/sub within a millisecond or so
	defer tick.Stop()
	for {
		h.mu.RLock()
		b := h.boards[id]
		h.mu.RUnlock()
		if b == nil || b.deleted.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ChangedAt is Changed for a write whose change event is known (epoch and version, from leaderboard.Result): when
// the board's loop has taken that event already, its lists are being re-read for it and nothing more is needed.
func (h *Hub) ChangedAt(board, epoch string, version int64) {
	h.mu.RLock()
	b := h.boards[board]
	h.mu.RUnlock()
	if b != nil {
		if b.sharded {
			// A shard's event version (a sharded submission reports none, see leaderboard.Result) says nothing of
			// the merged lists.
			epoch, version = "", 0
		}
		if m := b.taken.Load(); version > 0 && m != nil && m.epoch == epoch && m.ver >= version {
			return
		}
		b.inMu.Lock()
		b.dirty.Store(true) // under inMu: a refresh that ends now either sees lists or leaves dirty set
		// listsFor: the newest event of the writes waiting for the read, unknown (nil) once one of them did not
		// name its event or named another epoch's.
		switch {
		case version == 0 || b.lists && (b.listsFor == nil || b.listsFor.epoch != epoch):
			b.listsFor = nil
		case !b.lists || version > b.listsFor.ver:
			b.listsFor = &eventMark{epoch, version}
		}
		b.lists = true
		b.inMu.Unlock()
		b.signal()
	}
}

// SeasonChanged tells the hub that this process just started or ended a season of a board, so that
// subscriptions following its SEASON window move now rather than at the next PeriodCheck (other processes see
// it then). Optional.
func (h *Hub) SeasonChanged(board string) {
	h.mu.RLock()
	b := h.boards[board]
	h.mu.RUnlock()
	if b != nil {
		b.seasonCheck.Store(true)
		b.signal()
	}
}

// serves reports whether Top may serve the view's cached list: no change is pending for its board, and the board
// was not deleted (a retired board's list is never served, see retireLocked).
func (vw *view) serves() bool { return !vw.board.dirty.Load() && !vw.board.deleted.Load() }

// cacheView starts keeping a view fresh for Top, evicting the least recently used cached view beyond CacheSize.
// def was resolved when the hub had received gen deletion notices: when one came since, def may be a deleted
// board's, and nothing is cached (the next Top caches the view).
func (h *Hub) cacheView(def *leaderboard.Board, key viewKey, gen uint64) {
	h.mu.Lock()
	if h.closed || h.deletions.Load() != gen {
		h.mu.Unlock()
		return
	}
	b := h.boardLocked(def)
	vw := h.viewLocked(b, key)
	vw.used.Store(time.Now().UnixNano())
	var evicted *board
	if !vw.cached.Load() {
		vw.cached.Store(true)
		h.cachedN++
		if h.cachedN > h.cfg.CacheSize {
			var old *view
			for _, c := range h.views {
				if c.cached.Load() && c != vw && (old == nil || c.used.Load() < old.used.Load()) {
					old = c
				}
			}
			if old != nil {
				old.cached.Store(false)
				h.cachedN--
				evicted = old.board
			}
		}
	}
	h.mu.Unlock()
	b.signal()
	if evicted != nil {
		evicted.signal() // lets its loop drop the view (and itself) when nobody else uses them
	}
}

// boardLocked returns the live board of def, creating it and starting its loop. A board whose deletion notice
// arrived is retired first (its loop ends its subscriptions): whatever attaches now gets a board of its own, which
// reads everything before its first update. h.mu is held.
func (h *Hub) boardLocked(def *leaderboard.Board) *board {
	if b := h.boards[def.ID]; b != nil {
		if !b.deleted.Load() {
			return b
		}
		b.retireLocked()
	}
	b := &board{h: h, def: def, channels: h.store.Channels(def), shardOf: map[string]int{},
		sharded: def.Sharded(), live: map[string]bool{}, wake: make(chan struct{}, 1),
		views: map[viewKey]*view{}, watches: map[watchKey]*watch{}, deletionWatches: map[*DeletionWatch]struct{}{}}
	b.arrived = make([]eventMark, len(b.channels))
	if b.sharded {
		b.marks = make([]eventMark, len(b.channels))
	}
	b.dirty.Store(true)
	b.all = true // the first read also learns the board's event version
	h.boards[def.ID] = b
	for i, ch := range b.channels {
		b.shardOf[ch] = i
		h.byChannel[ch] = b
	}
	h.wg.Add(1)
	go b.loop()
	return b
}

// viewLocked returns the view of key on b, creating it. h.mu is held.
func (h *Hub) viewLocked(b *board, key viewKey) *view {
	if vw := h.views[key]; vw != nil {
		return vw
	}
	vw := &view{key: key, board: b, feeds: map[int]*feed{}}
	h.views[key] = vw
	b.mu.Lock()
	b.views[key] = vw
	b.mu.Unlock()
	return vw
}

// cachedList is a view's list as Top serves it.
type cachedList struct {
	entries []leaderboard.Entry // the top depth ranks (fewer: every rank the board lists)
	depth   int                 // how many ranks the read asked for
	size    int64
	token   uint64 // unique per list in the process (see TopToken)
}

// covers reports whether the list holds ranks 1 .. n as the store would list them.
func (c *cachedList) covers(n int) bool { return n <= c.depth || len(c.entries) < c.depth }

// listTokens numbers the cached lists of every view (see TopToken).
var listTokens atomic.Uint64

func (c *cachedList) page(r leaderboard.Resolved, offset, first int) *leaderboard.Page {
	p := &leaderboard.Page{Board: r.Board.ID, Order: r.Board.Order, Window: r.Window, Period: r.Period,
		Size: c.size}
	if offset < len(c.entries) {
		p.Entries = append([]leaderboard.Entry(nil), c.entries[offset:min(offset+first, len(c.entries))]...)
	} else {
		p.Entries = []leaderboard.Entry{}
	}
	return p
}
