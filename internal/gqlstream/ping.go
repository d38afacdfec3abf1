package gqlstream

import (
	"sync"
	"time"
)

// pingWorkers bounds the goroutines of one ping round: a peer whose socket is full holds one of them up to the
// write timeout, and must not hold up the pings of the others.
const pingWorkers = 16

// pingAll pings every connection each pingInterval, from this goroutine and pingWorkers short-lived ones per
// round, so that an idle connection costs no goroutine of its own for its liveness (see watchPongs).
func (s *Streams) pingAll() {
	t := time.NewTicker(s.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.pingStop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		conns := make([]*wsConn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		protocolPings := s.protocolPings
		work := make(chan *wsConn)
		var wg sync.WaitGroup
		for range min(pingWorkers, len(conns)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range work {
					c.ping()
					if s := c.session.Load(); s != nil {
						s.keepAlive(protocolPings)
					}
				}
			}()
		}
		for _, c := range conns {
			work <- c
		}
		close(work)
		wg.Wait()
	}
}

// watchPongs makes the peer's answers to websocket (RFC 6455 control frame) pings keep the connection: it is
// dropped when it has answered none for two intervals. Every websocket library answers them by itself, whatever
// its GraphQL protocol, unlike graphql-transport-ws's own ping message, which some clients (genqlient) never
// answer. The pings come from Streams.pingAll.
func (c *wsConn) watchPongs(every time.Duration) {
	extend := func(string) error {
		if c.closeSent.Load() {
			return nil // closing: the linger deadline stands
		}
		return c.ws.SetReadDeadline(time.Now().Add(2 * every))
	}
	c.ws.SetPongHandler(extend)
	_ = extend("")
}

// ping sends one websocket ping; a peer that does not take it within the write timeout is closed.
func (c *wsConn) ping() {
	if c.closeSent.Load() {
		return // closing: gorilla fails writes after the close frame, and the linger must run its course
	}
	_ = c.send(opPing, nil) // a failed write closes the connection
}
