package gqlstream

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/leaderboard/leaderboard/internal/mediatype"
)

// sseStream writes one event stream. The handler's goroutine owns it: it alone writes (events, keep-alives and
// the end), each write under a deadline, and it returns only once the operation's goroutine has returned, so
// nothing of the stream runs after the handler. The operation hands its events over one at a time and waits
// while one is being written: a stream holds at most the event being written and the next one, and a live
// subscription's updates meanwhile wait in the hub, which merges them (a client that falls behind gets a merged
// diff or a fresh snapshot, as over a websocket).
//
// A write that the client does not take within the write timeout (its socket buffers are full: it has stopped
// reading) ends the stream, and the connection is reset so that the kernel drops what it still held for the
// client at once (a socket closed with unsent bytes otherwise keeps them, up to the few MB of its send buffer,
// until the kernel gives up on the peer). When the stream's context ends (the client left, or shutdown, see
// Streams.CloseAll) the operation is stopped and complete is written within CloseLinger; a write under way
// then gets the same deadline.
type sseStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context // the request's, ended by CloseAll at shutdown
	conn    net.Conn        // the TCP connection, for abortiveClose (Config.NetConn; nil: unknown)
	timeout time.Duration   // one write
	ping    time.Duration   // a `: ping` after this long without a write; 0: none

	stop     func() bool // stops stopping's registration on ctx
	mu       sync.Mutex
	stopBy   time.Time // set when ctx has ended: the deadline of every write from then on
	finished bool      // the handler is returning: stopping must not touch the connection any more
}

func newSSEStream(w http.ResponseWriter, r *http.Request, conn net.Conn, timeout, ping time.Duration) *sseStream {
	s := &sseStream{w: w, rc: http.NewResponseController(w), ctx: r.Context(), conn: conn, timeout: timeout, ping: ping}
	s.stop = context.AfterFunc(s.ctx, s.stopping)
	return s
}

// stopping cuts the deadline of the write under way, and of those to come, to CloseLinger from now.
func (s *sseStream) stopping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.stopBy = time.Now().Add(CloseLinger)
	_ = s.rc.SetWriteDeadline(s.stopBy)
}

// end is deferred by the handler: from its return on, nothing touches the response.
func (s *sseStream) end() {
	s.stop()
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
}

// open sends the stream's headers and a first comment, so that the client knows at once that its stream is open.
func (s *sseStream) open() bool {
	h := s.w.Header()
	h.Set("Content-Type", mediatype.EventStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer answers (nginx) pass the events on as they come
	s.w.WriteHeader(http.StatusOK)
	s.abortiveClose(true)
	return s.write(sseOpenComment)
}

// serve runs produce on a goroutine of its own and writes what it sends: each event, a ping after every quiet
// ping interval, and complete when produce has returned or the stream's context has ended (produce is stopped
// first). send returns false once the stream has ended: produce must then return. serve returns when produce has.
func (s *sseStream) serve(produce func(ctx context.Context, send func([]byte) bool)) {
	ctx, cancel := context.WithCancel(s.ctx)
	events := make(chan []byte)
	done := make(chan struct{})
	go func() {
		defer close(done)
		produce(ctx, func(ev []byte) bool {
			select {
			case events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	var pings <-chan time.Time
	var timer *time.Timer
	if s.ping > 0 {
		timer = time.NewTimer(s.ping)
		defer timer.Stop()
		pings = timer.C
	}
	for s.next(events, pings, done, cancel) {
		if timer != nil {
			timer.Reset(s.ping) // the next ping comes a ping interval after the last write
		}
	}
}

// next writes the next thing the stream has to write, and reports whether the stream goes on.
func (s *sseStream) next(events <-chan []byte, pings <-chan time.Time, done <-chan struct{}, cancel func()) bool {
	var ev []byte
	select {
	case ev = <-events:
	case <-pings:
		ev = ssePing
	case <-done:
		s.complete()
		return false
	case <-s.ctx.Done():
		cancel()
		<-done
		s.complete()
		return false
	}
	return s.write(ev)
}

// complete ends the stream with complete; once it is written the connection closes as usual again.
func (s *sseStream) complete() {
	if s.write(sseComplete) {
		s.abortiveClose(false)
	}
}

// write writes b and flushes it within the write timeout (after the stream's context has ended: by stopBy), and
// reports whether it did. A failed write closes the connection (net/http does), with a reset (abortiveClose).
func (s *sseStream) write(b []byte) bool {
	s.mu.Lock()
	deadline := s.stopBy
	if deadline.IsZero() {
		deadline = time.Now().Add(s.timeout)
	}
	err := s.rc.SetWriteDeadline(deadline)
	s.mu.Unlock()
	if err == nil {
		_, err = s.w.Write(b)
	}
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		return false
	}
	return true
}

// abortiveClose makes a close of the connection, while on, a reset that drops what the kernel still holds for
// the client. net/http closes the connection itself when a write fails, before the write returns, so this is set
// while the stream runs and cleared once it has ended well (a keep-alive connection then closes as usual).
func (s *sseStream) abortiveClose(on bool) {
	if s.conn == nil {
		return
	}
	if tc, ok := s.conn.(*net.TCPConn); ok {
		secs := -1 // the default: the kernel sends what it holds after the close
		if on {
			secs = 0
		}
		_ = tc.SetLinger(secs)
	}
}
