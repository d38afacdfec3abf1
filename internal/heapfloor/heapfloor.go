// Package heapfloor keeps the garbage collector's heap goal at or above a floor while the live heap is small.
//
// With GOGC=100 the collector runs each time the heap reaches twice what the last collection left live. A server
// that keeps 10 MiB live and allocates 150 MB/s for its requests then collects about 15 times a second, and every
// collection marks, sweeps and scans every goroutine's stack: a tenth of its CPU, for memory it never needed to
// give back. A larger GOGC would do for that server and cost it nine times its heap once it holds thousands of
// subscribers. The floor does the first without the second: after every collection it reads the live heap
// and the stacks and globals to scan (runtime/metrics) and sets GOGC so that the next goal is the larger of the
// floor and what the process's own GOGC gives. GOMEMLIMIT, when set, still bounds the heap (the runtime collects before it).
package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The runtime's figures of the last collection that its heap goal is made of.
var samples = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// Floor holds the heap goal at or above its floor until Stop. Made by Start.
type Floor struct {
	floor uint64
	base  int // GOGC the process started with (the environment's, default 100)

	mu      sync.Mutex // a collection's cleanup and Stop
	stopped bool
	percent int // GOGC set now
	sample  []metrics.Sample

	cycles atomic.Int64 // collections seen (tests wait on it)
}

// sentinel is garbage made for the collector to find: its cleanup runs after the collection that frees it. It
// holds a pointer, so it is never a tiny allocation (which may share a block and outlive its cycle).
type sentinel struct {
	_ *byte
	_ [8]byte
}

// Start sets the process's GOGC for a heap goal of at least floor bytes and keeps it so after every collection.
// It returns nil (and changes nothing) when floor is 0 or the process runs with GOGC=off. Only one Floor should
// run in a process: GOGC is the process's.
func Start(floor uint64) *Floor {
	if floor == 0 {
		return nil
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return nil
	}
	f := &Floor{floor: floor, base: base, percent: base, sample: make([]metrics.Sample, len(samples))}
	for i, name := range samples {
		f.sample[i].Name = name
	}
	f.mu.Lock()
	f.adjust()
	f.mu.Unlock()
	f.arm()
	return f
}

// Stop gives the process its own GOGC back. Safe on nil and more than once.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.base)
	}
}

// Percent returns the GOGC the floor set after the last collection it saw.
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.percent
}

// Cycles returns how many collections the floor has seen since Start.
func (f *Floor) Cycles() int64 { return f.cycles.Load() }

func (f *Floor) arm() {
	runtime.AddCleanup(new(sentinel), (*Floor).collected, f)
}

// collected runs after each collection (the cleanup of the sentinel it freed), on the runtime's cleanup goroutine.
func (f *Floor) collected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.adjust()
	f.cycles.Add(1)
	f.arm()
}

// adjust sets GOGC for the live heap the last collection left. f.mu is held.
func (f *Floor) adjust() {
	metrics.Read(f.sample)
	var v [3]uint64
	for i, s := range f.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return // not in this runtime: leave GOGC as it is
		}
		v[i] = s.Value.Uint64()
	}
	if p := Percent(f.floor, v[0], v[1]+v[2], f.base); p != f.percent {
		debug.SetGCPercent(p)
		f.percent = p
	}
}

// heapMinimum is the runtime's smallest heap goal at GOGC=100 (its defaultHeapMinimum); it scales with GOGC.
const heapMinimum = 4 << 20

// Percent returns the smallest GOGC, and never less than base (the process's own), whose heap goal reaches floor
// for a heap the last collection left with live bytes live and roots bytes of stacks and globals to scan. The
// runtime's goal at GOGC p is the larger of live + (live + roots) × p/100 and its minimum heap, 4 MiB × p/100.
// GOGC is at most MaxInt32.
func Percent(floor, live, roots uint64, base int) int {
	p := math.Ceil(float64(floor) * 100 / heapMinimum) // the minimum heap alone reaches the floor
	if live >= floor {
		p = 0
	} else if live+roots > 0 {
		p = math.Min(p, math.Ceil(float64(floor-live)*100/float64(live+roots)))
	}
	return max(int(math.Min(p, math.MaxInt32)), base)
}
