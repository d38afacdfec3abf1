package main

import (
	"math"
	"sync/atomic"
	"time"
)

// histogram counts durations in 100 µs buckets up to 1 s and 10 ms buckets up to 100 s; safe for concurrent use.
type histogram struct {
	fine   [10_000]atomic.Int64 // [0, 1s) by 100µs
	coarse [9_900]atomic.Int64  // [1s, 100s) by 10ms; the last bucket also takes anything longer
	n      atomic.Int64
}

func (h *histogram) add(d time.Duration) {
	h.n.Add(1)
	if d < time.Second {
		h.fine[max(d, 0)/(100*time.Microsecond)].Add(1)
		return
	}
	h.coarse[min(int((d-time.Second)/(10*time.Millisecond)), len(h.coarse)-1)].Add(1)
}

func (h *histogram) count() int64 { return h.n.Load() }

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i := range o.fine {
		h.fine[i].Add(o.fine[i].Load())
	}
	for i := range o.coarse {
		h.coarse[i].Add(o.coarse[i].Load())
	}
	h.n.Add(o.n.Load())
}

func (h *histogram) reset() {
	for i := range h.fine {
		h.fine[i].Store(0)
	}
	for i := range h.coarse {
		h.coarse[i].Store(0)
	}
	h.n.Store(0)
}

// quantile returns the upper edge of the bucket holding the q-quantile (0 when empty).
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.fine {
		if seen += h.fine[i].Load(); seen >= rank {
			return time.Duration(i+1) * 100 * time.Microsecond
		}
	}
	for i := range h.coarse {
		if seen += h.coarse[i].Load(); seen >= rank {
			return time.Second + time.Duration(i+1)*10*time.Millisecond
		}
	}
	return 100 * time.Second
}
