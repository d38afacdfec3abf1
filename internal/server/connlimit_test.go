package server

import (
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// pipeListener hands out the server ends of in-memory pipes, one per Accept, and remembers which it closed.
type pipeListener struct {
	net.Listener // nil: only Accept is used
	next         chan net.Conn
}

type trackedConn struct {
	net.Conn
	id     int
	closed atomic.Bool
}

func (c *trackedConn) Close() error { c.closed.Store(true); return c.Conn.Close() }

func (l *pipeListener) Accept() (net.Conn, error) { return <-l.next, nil }

// TestConnLimitEvictsLongestIdle drives connLimit through random connection lives (accepted, busy, idle again,
// closed, hijacked) against a model of the idle list, a slice in the order connections last went idle: at the
// bound, every new connection closes exactly the model's longest-idle one (never a busy, new or hijacked one),
// and with none idle it is refused; open counts and the idle list stay the model's.
func TestConnLimitEvictsLongestIdle(t *testing.T) {
	const max = 8
	rng := rand.New(rand.NewPCG(1, 2))
	ln := &pipeListener{next: make(chan net.Conn, 1)}
	var refused atomic.Int64
	l := newConnLimit(ln, max, func() { refused.Add(1) })

	var open []*countedConn // the model: open connections, and the idle ones oldest first
	var idle []*countedConn
	ids := 0
	raw := map[*countedConn]*trackedConn{}
	removeFrom := func(s []*countedConn, c *countedConn) []*countedConn {
		if i := slices.Index(s, c); i >= 0 {
			return slices.Delete(s, i, i+1)
		}
		return s
	}
	accept := func() {
		ids++
		a, b := net.Pipe()
		defer b.Close()
		tc := &trackedConn{Conn: a, id: ids}
		wantVictim := (*countedConn)(nil)
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := l.Accept()
			accepted <- c
		}()
		if len(open) >= max && len(idle) == 0 {
			// Refused: Accept closes it and waits for the next one, which fits once a connection closes.
			before := refused.Load()
			ln.next <- tc
			for refused.Load() == before {
				runtime.Gosched()
			}
			if !tc.closed.Load() {
				t.Fatalf("connection %d refused but not closed", tc.id)
			}
			victim := open[rng.IntN(len(open))]
			victim.Close()
			open, idle = removeFrom(open, victim), removeFrom(idle, victim)
			ids++
			a2, b2 := net.Pipe()
			defer b2.Close()
			tc = &trackedConn{Conn: a2, id: ids}
		} else if len(open) >= max {
			wantVictim = idle[0]
		}
		ln.next <- tc
		cc := (<-accepted).(*countedConn)
		raw[cc] = tc
		l.connState(cc, http.StateNew)
		if wantVictim != nil {
			for _, o := range open {
				if closed := raw[o].closed.Load(); closed != (o == wantVictim) {
					t.Fatalf("accepting %d: connection %d closed %v, want only the longest idle %d closed",
						tc.id, raw[o].id, closed, raw[wantVictim].id)
				}
			}
			open, idle = removeFrom(open, wantVictim), removeFrom(idle, wantVictim)
		}
		open = append(open, cc)
	}
	for step := 0; step < 5000; step++ {
		switch k := rng.IntN(10); {
		case k < 3 || len(open) == 0:
			accept()
		case k < 6: // a request starts
			c := open[rng.IntN(len(open))]
			l.connState(c, http.StateActive)
			idle = removeFrom(idle, c)
		case k < 8: // a request ends: idle, newest
			c := open[rng.IntN(len(open))]
			l.connState(c, http.StateIdle)
			idle = append(removeFrom(idle, c), c)
		case k < 9: // closed by either side; net/http reports it, a hijacked connection's closer does not
			c := open[rng.IntN(len(open))]
			c.Close()
			if rng.IntN(2) == 0 {
				l.connState(c, http.StateClosed)
			}
			open, idle = removeFrom(open, c), removeFrom(idle, c)
		default: // a websocket: never idle again, still counted until closed
			c := open[rng.IntN(len(open))]
			l.connState(c, http.StateActive)
			l.connState(c, http.StateHijacked)
			idle = removeFrom(idle, c)
		}
		l.mu.Lock()
		var got []*countedConn
		for c := l.idle.head; c != nil; c = c.next {
			got = append(got, c)
		}
		n := l.open
		l.mu.Unlock()
		if !slices.Equal(got, idle) || n != len(open) {
			t.Fatalf("step %d: %d open and %d idle, want %d and %d (the model's order)", step, n, len(got),
				len(open), len(idle))
		}
	}
	if refused.Load() == 0 {
		t.Error("the walk never reached a refusal: it does not cover the bound with no idle connection")
	}
}
