package pubsub

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// listenConn is one Redis pub/sub connection and the goroutine that reads it. On standalone Redis (and with
// plain PUBLISH) there is one for the whole process. On Redis Cluster with sharded pub/sub there is one per hash
// slot in use, because SSUBSCRIBE (and go-redis's resubscription after a reconnect) takes channels of one slot.
type listenConn struct {
	key       int // hash slot, or -1 for the process-wide connection
	ps        *redis.PubSub
	channels  int
	reading   bool
	reopening bool          // a replacement is being opened (the slot moved); guarded by Hub.listenMu
	done      chan struct{} // closed when the connection is closed on purpose

	// leaving counts our own unsubscribes per channel whose confirmation has not been read yet, so the reader
	// tells them from Redis ending a subscription because the slot moved.
	leavingMu sync.Mutex
	leaving   map[string]int
}

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

// connKey returns which connection listens to channel.
func (h *Hub) connKey(channel string) int {
	if h.store.Sharded() {
		return leaderboard.HashSlot(channel)
	}
	return -1
}

// listen adds channel to the connection that serves it, opening the connection when needed. A failed subscribe
// is retried by go-redis when the connection comes back (the channel is recorded either way).
func (h *Hub) listen(channel string) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	if h.isClosed() {
		return
	}
	k := h.connKey(channel)
	lc := h.conns[k]
	if lc == nil {
		lc = &listenConn{key: k, done: make(chan struct{}), ps: h.store.NewSubscription(h.ctx)}
		h.conns[k] = lc
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	err := h.store.Listen(ctx, lc.ps, channel)
	lc.channels++
	if lc.channels == 1 && !lc.reading {
		// Started only now: a cluster PubSub picks its node from the first channel it connects with.
		lc.reading = true
		h.wg.Add(1)
		go h.read(lc)
	}
	if err != nil {
		h.cfg.Logger.Warn("pubsub: subscribe failed; retried on reconnect", "channel", channel, "err", err)
	}
}

// unlisten removes channel unless a newer board took it over meanwhile. A per-slot cluster connection is
// closed when its last channel goes; the process-wide one stays open.
func (h *Hub) unlisten(channel string) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	h.mu.RLock()
	_, again := h.byChannel[channel]
	h.mu.RUnlock()
	lc := h.conns[h.connKey(channel)]
	if lc == nil || h.isClosed() {
		return
	}
	lc.channels--
	if again { // a newer board of the same id listens on it (and has counted itself)
		return
	}
	if lc.key >= 0 && lc.channels <= 0 {
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
			// go-redis has reconnected and resubscribed every channel in one command, so all of them are live.
			lost = false
			h.cfg.Logger.Info("pubsub: Redis subscription connection is back; sending snapshots")
			h.forBoardsOf(lc, (*board).connBack)
		}
		switch m := msg.(type) {
		case *redis.Message:
			if b := h.boardByChannel(m.Channel); b != nil {
				b.push(m.Payload)
			}
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				if b := h.boardByChannel(m.Channel); b != nil {
					b.confirm()
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

func (h *Hub) forBoardsOf(lc *listenConn, f func(*board)) {
	h.mu.RLock()
	var bs []*board
	for ch, b := range h.byChannel {
		if h.connKey(ch) == lc.key {
			bs = append(bs, b)
		}
	}
	h.mu.RUnlock()
	for _, b := range bs {
		f(b)
	}
}

// movedError reports a redirection: the node no longer serves the slot of a channel.
func movedError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// reopen replaces a connection whose slot moved: it closes it and subscribes its boards' channels on a new
// connection, which go-redis opens to the slot's owner once it has reloaded the cluster's slot map. Until the
// new subscription is confirmed the boards serve nothing from memory (connLost); the confirmation re-reads every
// list and sends every subscriber a snapshot. Called by the connection's reader, which returns right after.
func (h *Hub) reopen(lc *listenConn) {
	h.listenMu.Lock()
	defer h.listenMu.Unlock()
	if lc.reopening || h.isClosed() || h.conns[lc.key] != lc {
		return
	}
	lc.reopening = true
	if cc, ok := h.store.Redis().(*redis.ClusterClient); ok {
		cc.ReloadState(h.ctx)
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// Give go-redis a moment to reload the slot map; a subscription that still lands on the old node gets a
		// MOVED reply and comes back here.
		select {
		case <-time.After(200 * time.Millisecond):
		case <-h.done:
			return
		}
		h.listenMu.Lock()
		if h.isClosed() || h.conns[lc.key] != lc {
			h.listenMu.Unlock()
			return
		}
		delete(h.conns, lc.key)
		close(lc.done)
		_ = lc.ps.Close()
		h.mu.RLock()
		var channels []string
		for ch := range h.byChannel {
			if h.connKey(ch) == lc.key {
				channels = append(channels, ch)
			}
		}
		h.mu.RUnlock()
		h.listenMu.Unlock()
		for _, ch := range channels {
			h.listen(ch)
		}
	}()
}
