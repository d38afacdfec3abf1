package pubsub

import (
	"context"
	"errors"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// listenConn is one Redis pub/sub connection and the goroutine that reads it. On standalone Redis (and with
// plain PUBLISH) there is one for the whole process. On Redis Cluster with sharded pub/sub there is one per
// primary that serves a watched board's slot, so a process watching thousands of boards holds as many
// connections as the cluster has primaries. Each board's channel is subscribed with a command of its own:
// SSUBSCRIBE takes channels of one slot.
type listenConn struct {
	key       string // the primary's address (Store.SubscriptionNode), "" for the process-wide connection
	ps        *redis.PubSub
	reading   bool
	confirmed atomic.Bool   // a subscription on it was confirmed: a reopen of its node starts from the shortest wait
	reopening bool          // a replacement is being opened (a slot moved, the connection broke); guarded by Hub.listenMu
	done      chan struct{} // closed when the connection is closed on purpose

	// chans counts the listens of each channel on this connection (a newer board of the same id listens before
	// the old one has gone). The reader reads it to find the boards a lost connection served.
	chansMu sync.Mutex
	chans   map[string]int

	// leaving counts our own unsubscribes per channel whose confirmation has not been read yet, so the reader
	// tells them from Redis ending a subscription because the slot moved.
	leavingMu sync.Mutex
	leaving   map[string]int
}

// reopenFirst is how long a reopen waits before it subscribes again: go-redis reloads the cluster's slot map
// meanwhile. Failed reopens wait twice as long each time, up to reopenMax.
const (
	reopenFirst = 200 * time.Millisecond
	reopenMax   = 5 * time.Second
)

// left records an unsubscribe of ours (d = 1) or consumes the confirmation of one (d = -1, reporting whether
// there was one).
func (lc *listenConn) left(channel string, d int) bool {
	lc.leavingMu.Lock()
	defer lc.leavingMu.Unlock()
	n := lc.leaving[channel]
	if d < 0 && n == 0 {
		return false
	}
	if lc.leaving == nil {
		lc.leaving = map[string]int{}
	}
	if n+d == 0 {
		delete(lc.leaving, channel)
	} else {
		lc.leaving[channel] = n + d
	}
	return true
}

// count adds d to channel's listens and returns the new count and how many channels the connection has.
func (lc *listenConn) count(channel string, d int) (n, channels int) {
	lc.chansMu.Lock()
	defer lc.chansMu.Unlock()
	n = lc.chans[channel] + d
	if n <= 0 {
		delete(lc.chans, channel)
	} else {
		lc.chans[channel] = n
	}
	return n, len(lc.chans)
}

// channels returns the connection's channels and their listen counts.
func (lc *listenConn) channels() map[string]int {
	lc.chansMu.Lock()
	defer lc.chansMu.Unlock()
	return maps.Clone(lc.chans)
}

// listen adds channel to the connection that serves it, opening the connection when needed. A failed subscribe
// is retried when the connection comes back (the channel is recorded either way).
func (h *Hub) listen(channel string) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	if err := h.listenLocked(channel, 1); err != nil {
		h.cfg.Logger.Warn("pubsub: subscribe failed; retried on reconnect", "channel", channel, "err", err)
	}
}

// listenLocked subscribes channel, counted n times, on its node's connection. A sharded connection whose
// subscribe fails is replaced (reopen), and until then its new channels are only counted: the replacement
// subscribes them all. The caller holds listenMu.
func (h *Hub) listenLocked(channel string, n int) error {
	if h.isClosed() {
		return nil
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	key, open := h.store.SubscriptionNode(ctx, channel)
	lc := h.conns[key]
	if lc == nil {
		lc = &listenConn{key: key, done: make(chan struct{}), ps: open(h.ctx), chans: map[string]int{}}
		h.conns[key] = lc
	}
	h.chanConn[channel] = lc
	lc.count(channel, n)
	if lc.reopening {
		return nil
	}
	err := h.store.Listen(ctx, lc.ps, channel)
	if err != nil && key != "" {
		h.reopenLocked(lc)
		return err
	}
	if !lc.reading {
		// Started only now: a cluster PubSub picks its node from the first channel it connects with.
		lc.reading = true
		h.wg.Add(1)
		go h.read(lc)
	}
	return err
}

// unlisten removes channel unless a newer board took it over meanwhile. A cluster node's connection is closed
// when its last channel goes; the process-wide one stays open.
func (h *Hub) unlisten(channel string) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	h.mu.RLock()
	_, again := h.byChannel[channel]
	h.mu.RUnlock()
	lc := h.chanConn[channel]
	if lc == nil || h.isClosed() {
		return
	}
	n, left := lc.count(channel, -1)
	if again || n > 0 { // a newer board of the same id listens on it (and has counted itself)
		return
	}
	delete(h.chanConn, channel)
	if lc.key != "" && left == 0 {
		delete(h.conns, lc.key)
		close(lc.done)
		_ = lc.ps.Close()
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	lc.left(channel, 1)
	if err := h.store.Unlisten(ctx, lc.ps, channel); err != nil {
		lc.left(channel, -1) // no confirmation will come
	}
}

// healthEvery is how long the reader waits for a message before it pings the connection.
const healthEvery = 3 * time.Second

// read is the reader goroutine of a connection. It only hands raw payloads to boards' inboxes and flags, so it
// never waits for subscribers, Redis reads or locks held for long.
func (h *Hub) read(lc *listenConn) {
	defer h.wg.Done()
	lost := false
	backoff := 50 * time.Millisecond
	for {
		msg, err := lc.ps.ReceiveTimeout(h.ctx, healthEvery)
		select {
		case <-lc.done:
			return
		case <-h.done:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = lc.ps.Ping(h.ctx)
				continue
			}
			if movedError(err) {
				// The slot is served elsewhere now (a reshard); go-redis would stay on this node.
				h.forBoardsOf(lc, (*board).connLost)
				h.reopen(lc)
				return
			}
			if lc.key != "" {
				// go-redis would resubscribe every channel of the node in one SSUBSCRIBE, which Redis refuses
				// across slots (CROSSSLOT): subscribe them again one by one on a new connection.
				h.cfg.Logger.Warn("pubsub: Redis subscription connection lost; subscribing again", "node", lc.key,
					"err", err)
				h.forBoardsOf(lc, (*board).connLost)
				h.reopen(lc)
				return
			}
			if !lost {
				lost = true
				h.cfg.Logger.Warn("pubsub: Redis subscription connection lost; reconnecting", "err", err)
				h.forBoardsOf(lc, (*board).connLost)
			}
			select {
			case <-time.After(backoff):
			case <-lc.done:
				return
			case <-h.done:
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if lost {
			// go-redis has reconnected the process-wide connection and resubscribed every channel in one
			// command, so all of them are live.
			lost = false
			h.cfg.Logger.Info("pubsub: Redis subscription connection is back; sending snapshots")
			h.forBoardsOf(lc, (*board).connBack)
		}
		switch m := msg.(type) {
		case *redis.Message:
			if b := h.boardByChannel(m.Channel); b != nil {
				b.push(m.Channel, m.Payload)
			}
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				lc.confirmed.Store(true)
				if b := h.boardByChannel(m.Channel); b != nil {
					b.confirm(m.Channel)
				}
			case "sunsubscribe":
				// Redis ends a shard channel's subscription when its slot moves to another node (resharding).
				// Our own unsubscribes come for channels that no board listens to any more.
				if !lc.left(m.Channel, -1) && h.boardByChannel(m.Channel) != nil {
					h.cfg.Logger.Info("pubsub: a board's slot moved; subscribing on its new node", "channel", m.Channel)
					h.forBoardsOf(lc, (*board).connLost)
					h.reopen(lc)
					return
				}
			}
		}
	}
}

func (h *Hub) boardByChannel(ch string) *board {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.byChannel[ch]
}

// forBoardsOf calls f for each channel of the connection and the board that listens on it.
func (h *Hub) forBoardsOf(lc *listenConn, f func(*board, string)) {
	chans := lc.channels()
	type boardChan struct {
		b  *board
		ch string
	}
	h.mu.RLock()
	var bs []boardChan
	for ch := range chans {
		if b := h.byChannel[ch]; b != nil {
			bs = append(bs, boardChan{b, ch})
		}
	}
	h.mu.RUnlock()
	for _, bc := range bs {
		f(bc.b, bc.ch)
	}
}

// movedError reports a redirection: the node no longer serves the slot of a channel.
func movedError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// reopen replaces a connection whose slot moved or that broke: it closes it and subscribes its channels again,
// each on the connection of the node that serves its slot now (go-redis reloads the cluster's slot map
// meanwhile). Until a new subscription is confirmed its board serves nothing from memory (connLost); the
// confirmation re-reads every list and sends every subscriber a snapshot. Called by the connection's reader,
// which returns right after.
func (h *Hub) reopen(lc *listenConn) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	h.reopenLocked(lc)
}

// reopenLocked is reopen with listenMu held. The first reopen of a node waits reopenFirst; each further one
// before a subscription on the node is confirmed waits twice as long, up to reopenMax.
func (h *Hub) reopenLocked(lc *listenConn) {
	if lc.reopening || h.isClosed() || h.conns[lc.key] != lc {
		return
	}
	lc.reopening = true
	h.store.ReloadSubscriptionNodes(h.ctx)
	if lc.confirmed.Load() {
		delete(h.retry, lc.key)
	}
	wait := h.retry[lc.key]
	if wait == 0 {
		wait = reopenFirst
	}
	h.retry[lc.key] = min(2*wait, reopenMax)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// A subscription that still lands on the old node gets a MOVED reply and comes back here.
		select {
		case <-time.After(wait):
		case <-h.done:
			return
		}
		h.listenMu.Lock()
		defer h.listenMu.Unlock()
		if h.isClosed() || h.conns[lc.key] != lc {
			return
		}
		delete(h.conns, lc.key)
		close(lc.done)
		_ = lc.ps.Close()
		failed := 0
		var last error
		for ch, n := range lc.channels() {
			if h.chanConn[ch] == lc {
				delete(h.chanConn, ch)
			}
			if err := h.listenLocked(ch, n); err != nil {
				failed, last = failed+1, err
			}
		}
		if failed > 0 {
			h.cfg.Logger.Warn("pubsub: subscribing again failed; retrying", "channels", failed, "err", last)
		}
	}()
}
