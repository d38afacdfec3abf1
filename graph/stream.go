package graph

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
)

// StreamHolder is a PayloadHolder that can also write the rest of a subscription (topUpdates, rankUpdates)
// itself. gqlgen's websocket transport ran one goroutine per subscription that woke for every update and took it
// through the executor's response chain and encoding/json before writing it; at 10,000 subscribers that was a
// third of the server's CPU. A StreamHolder's connection instead pulls the later updates from a LiveStream when
// the hub has put them in (LiveStream.Bind), writes them with the subscription's id, and gets each one's data
// bytes from AppendNext (a topUpdates update is rendered once for every subscriber that gets it,
// TopUpdate.Shared). The first response still goes through gqlgen's executor: every check and error before the
// stream runs stays gqlgen's. The end is LiveStream.Last, the answer gqlgen's executor gives then.
type StreamHolder interface {
	PayloadHolder
	// HoldStream is Hold for the first response of s. Once the connection has written that response it calls
	// s.Bind; when it does not write it (the peer ended the subscription first), it never does.
	HoldStream(data []byte, s *LiveStream) (token uint64)
}

// LiveStream is the rest of one topUpdates subscription, for the connection that writes it (StreamHolder).
type LiveStream struct {
	field string // the subscription's root field
	// next appends the data of the next response waiting to dst (see AppendNext); set with the first response.
	next func(dst []byte) (_ []byte, got, end bool)

	wake    atomic.Pointer[func()]
	stopped atomic.Bool   // the subscription's context ended: nothing more of it may be written
	done    chan struct{} // closed by Finish
	finish  sync.Once
	sync    func() // from Bind

	endMu sync.Mutex
	onEnd func() // OnEnd's, called by Finish

	// last is the subscription's last response once the stream has ended (Last); set before the first
	// response is held.
	last func(context.Context) *graphql.Response
}

// Last is the subscription's last response, once the stream has ended (Finish, or its context): what gqlgen's
// executor would answer then (nil, or NOT_FOUND for a deleted board), for a transport that ends the subscription
// without it and so need not keep the executor's state of the operation while the subscription lasts.
func (s *LiveStream) Last(ctx context.Context) *graphql.Response {
	if s.last == nil {
		return nil
	}
	return s.last(ctx)
}

func newLiveStream(field string) *LiveStream {
	return &LiveStream{field: field, done: make(chan struct{})}
}

// Field is the subscription's root field (topUpdates or rankUpdates).
func (s *LiveStream) Field() string { return s.field }

// notify is the hub's signal (pubsub.Hub.SubscribeTopNotify): an update or the end is in the channel.
func (s *LiveStream) notify() {
	if f := s.wake.Load(); f != nil {
		(*f)()
	}
}

// Bind hands the stream to its connection: wake is called (from the hub's goroutines, so it must not block)
// whenever Next may have something, and once now. sync must return only when no write of this stream's
// responses that started before it is still under way: after the subscription's context ends, the end of the
// subscription is written only once sync has returned, so nothing of it follows its end.
func (s *LiveStream) Bind(wake, sync func()) {
	s.sync = sync
	s.wake.Store(&wake)
	wake()
}

// AppendNext appends the data of the next update waiting to dst, compact and HTML-escaped as gqlgen's transports
// write it; got is false when none is waiting, end reports that the hub has ended the subscription (then Finish
// must follow, once what was pulled before is written). It never waits.
func (s *LiveStream) AppendNext(dst []byte) (_ []byte, got, end bool) { return s.next(dst) }

// Stopped reports that the subscription's context has ended: the connection writes nothing more of it.
func (s *LiveStream) Stopped() bool { return s.stopped.Load() }

// Finish tells the subscription that the connection has written everything up to the end that Next reported:
// gqlgen may now end it.
func (s *LiveStream) Finish() {
	s.finish.Do(func() {
		close(s.done)
		s.endMu.Lock()
		f := s.onEnd
		s.endMu.Unlock()
		if f != nil {
			f()
		}
	})
}

// OnEnd is wait for a transport that does not keep a goroutine waiting: f is called once (it must not block)
// when the stream has ended (Finish) or ctx has; in the latter case, as in wait, once nothing more of the stream
// is written. The subscription's next response then comes at once.
func (s *LiveStream) OnEnd(ctx context.Context, f func()) {
	var once sync.Once
	end := func() { once.Do(f) }
	stop := context.AfterFunc(ctx, func() {
		s.stopped.Store(true)
		if s.sync != nil {
			s.sync()
		}
		end()
	})
	s.endMu.Lock()
	s.onEnd = func() { stop(); end() }
	s.endMu.Unlock()
	select {
	case <-s.done: // ended before onEnd was set
		stop()
		end()
	default:
	}
}

// wait is the subscription's second response: it returns when the stream has ended (Finish) or ctx has, and
// then no response of the stream is written any more.
func (s *LiveStream) wait(ctxDone <-chan struct{}) {
	select {
	case <-s.done:
	case <-ctxDone:
		s.stopped.Store(true)
		if s.sync != nil {
			s.sync()
		}
	}
}

type lifetimeKey struct{}

// WithLifetime returns ctx carrying life, the context whose end ends the operation, without the values of the
// layers that gqlgen puts between it and a resolver (operation, response and field contexts, which hold the
// operation's variables, arguments and caches). What lasts as long as a subscription (context.AfterFunc
// registrations) is tied to life: an AfterFunc keeps its parent context, and an idle subscriber kept all of
// those layers through it.
func WithLifetime(ctx, life context.Context) context.Context {
	return context.WithValue(ctx, lifetimeKey{}, life)
}

// lifetime returns the context set by WithLifetime, or ctx itself.
func lifetime(ctx context.Context) context.Context {
	if l, ok := ctx.Value(lifetimeKey{}).(context.Context); ok {
		return l
	}
	return ctx
}
