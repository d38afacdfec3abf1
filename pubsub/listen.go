package pubsub

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// listenConn is one Redis pub/sub connection and the goroutine that reads it. On standalone Redis (and with
// plain PUBLISH) there is one for the whole process. On Redis Cluster with sharded pub/sub there is one per hash
// slot in use, because SSUBSCRIBE (and go-redis's resubscription after a reconnect) takes channels of one slot.
type listenConn struct {
	key      int // hash slot, or -1 for the process-wide connection
	ps       *redis.PubSub
	channels int
	reading  bool
	done     chan struct{} // closed when the connection is closed on purpose
}

// connKey returns which connection listens to channel.
func (h *Hub) connKey(channel string) int {
	if h.cluster && h.store.PublishCommand() == leaderboard.PublishSharded {
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
		lc = &listenConn{key: k, done: make(chan struct{})}
		if h.store.PublishCommand() == leaderboard.PublishSharded {
			lc.ps = h.store.Redis().SSubscribe(h.ctx)
		} else {
			lc.ps = h.store.Redis().Subscribe(h.ctx)
		}
		h.conns[k] = lc
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	var err error
	if h.store.PublishCommand() == leaderboard.PublishSharded {
		err = lc.ps.SSubscribe(ctx, channel)
	} else {
		err = lc.ps.Subscribe(ctx, channel)
	}
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
	if h.store.PublishCommand() == leaderboard.PublishSharded {
		_ = lc.ps.SUnsubscribe(ctx, channel)
	} else {
		_ = lc.ps.Unsubscribe(ctx, channel)
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
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				if b := h.boardByChannel(m.Channel); b != nil {
					b.confirm()
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
