package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The writers on other boards around the ledger scenario's restore (scen_ledger_restore.go): closed-loop clients
// (startWriters) or writers at a fixed rate (startPacedWriters), their outcomes summarized by span (meter).

// ledgerPacedWorkers bounds the open-loop writers' requests in flight: past it they fall behind (counted).
const ledgerPacedWorkers = 64

// writerRun is what a set of writers shares: their HTTP client, context, goroutines and submission numbers.
type writerRun struct {
	h      *rawHTTP
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64
	m      *meter
	once   sync.Once
}

// newWriterRun starts the span of writers on sv whose outcomes go to m.
func newWriterRun(ctx context.Context, sv *service, m *meter) *writerRun {
	r := &writerRun{h: newRawHTTP(sv.addr, "/graphql"), m: m}
	r.ctx, r.cancel = context.WithCancel(ctx)
	m.take()
	return r
}

// run runs f in a goroutine of the writers.
func (r *writerRun) run(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// submit sends the writers' next submission to board through connection w, its latency counted from due; false
// when the writers were stopped meanwhile.
func (r *writerRun) submit(w int, board func(i int64) string, due time.Time) bool {
	i := r.seq.Add(1) - 1
	p, s := workload(i)
	_, err := r.h.post(r.ctx, w, submitKey, submitBody(board(i), p, s))
	if r.ctx.Err() != nil && err != nil {
		return false
	}
	r.m.add(time.Since(due), err)
	return true
}

// stop ends the writers and waits for them (a second call does nothing).
func (r *writerRun) stop() {
	r.once.Do(func() {
		r.cancel()
		r.wg.Wait()
		r.h.closeAll()
	})
}

// startWriters starts n closed-loop submitScore clients on sv, client w writing to boards[w % len(boards)], each
// outcome going to m; the returned stop ends them and waits (a second call does nothing).
func (e *env) startWriters(ctx context.Context, sv *service, boards []string, n int, m *meter) (stop func()) {
	r := newWriterRun(ctx, sv, m)
	for w := range n {
		board := func(int64) string { return boards[w%len(boards)] }
		r.run(func() {
			for r.ctx.Err() == nil && r.submit(w, board, time.Now()) {
			}
		})
	}
	return r.stop
}

// startPacedWriters starts open-loop submitScore writers on sv: rate submissions a second in all, the i-th due at
// i/rate seconds after the start and written to boards[i % len(boards)] by whichever of ledgerPacedWorkers
// goroutines is free; each outcome goes to m with its latency from when it fell due. A submission due when no
// goroutine is free is not sent and counts as an error. The returned stop ends them and waits.
func (e *env) startPacedWriters(ctx context.Context, sv *service, boards []string, rate float64, m *meter) (
	stop func()) {
	r := newWriterRun(ctx, sv, m)
	board := func(i int64) string { return boards[int(i)%len(boards)] }
	due := make(chan time.Time) // unbuffered: a send succeeds only when a goroutine is free
	for w := range ledgerPacedWorkers {
		r.run(func() {
			for {
				select {
				case <-r.ctx.Done():
					return
				case at := <-due:
					if !r.submit(w, board, at) {
						return
					}
				}
			}
		})
	}
	r.run(func() {
		start := time.Now()
		var sent int64
		for r.ctx.Err() == nil {
			for n := int64(time.Since(start).Seconds() * rate); sent < n; sent++ {
				at := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
				select {
				case due <- at:
				default:
					m.add(time.Since(at), errBehind)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	return r.stop
}

// errBehind is the outcome of an open-loop submission that found every writer busy.
var errBehind = fmt.Errorf("the open-loop writers fell behind: %d submissions in flight", ledgerPacedWorkers)

// meter collects the outcomes of operations that run on their own (the writers around the restore) and
// summarizes them by span: take returns the span since the previous take.
type meter struct {
	mu       sync.Mutex
	lat      []time.Duration
	errs     int64
	firstErr string
	since    time.Time
}

func (m *meter) add(d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lat = append(m.lat, d)
	if err != nil {
		if m.errs++; m.errs == 1 {
			m.firstErr = err.Error()
		}
	}
}

// take summarizes the operations that ended since the previous take (the first take: since the first add).
func (m *meter) take() Sample {
	m.mu.Lock()
	lat, errs, first, since := m.lat, m.errs, m.firstErr, m.since
	m.lat, m.errs, m.firstErr, m.since = nil, 0, "", time.Now()
	m.mu.Unlock()
	el := time.Duration(0)
	if !since.IsZero() {
		el = time.Since(since)
	}
	s := summarize(lat, el)
	s.Errs, s.FirstErr = errs, first
	return s
}
