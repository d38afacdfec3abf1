package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is the outcome of one bounded load step.
type Sample struct {
	Ops            int64         // operations completed (failed ones included)
	Errs           int64         // operations that failed
	FirstErr       string        // the first failure, for the report
	Elapsed        time.Duration // wall time of the measured phase
	P50, P99, P999 time.Duration // latency percentiles of the measured operations
	Rate           float64       // operations per second
	ItemsPerOp     int           // e.g. scores per bulk call; 1 otherwise
	CPU            float64       // CPU of a watched process during the step, in cores (0: not measured)
	RSS            int64         // bytes of a watched process at the end of the step (0: not measured)
	Extra          map[string]float64
	latencies      []time.Duration
}

// ItemRate is items per second (Rate × ItemsPerOp).
func (s Sample) ItemRate() float64 { return s.Rate * float64(max(s.ItemsPerOp, 1)) }

// Op is one operation of a load step: worker w's i-th call.
type Op func(ctx context.Context, w int, i int64) error

// Step bounds a load step by time and by count: it ends at whichever comes first.
type Step struct {
	Workers  int
	Duration time.Duration // measured phase
	Warmup   time.Duration // unmeasured phase before it
	MaxOps   int64         // most operations in the measured phase
}

// drive runs op from st.Workers goroutines in a closed loop (each waits for its reply before the next call):
// first the warmup, then the measured phase.
func drive(ctx context.Context, st Step, op Op) Sample {
	var seq atomic.Int64 // call numbers keep counting across phases, so ids stay unique
	if st.Warmup > 0 {
		runPhase(ctx, st.Workers, st.Warmup, math.MaxInt64, &seq, op)
	}
	return runPhase(ctx, st.Workers, st.Duration, st.MaxOps, &seq, op)
}

func runPhase(ctx context.Context, workers int, d time.Duration, maxOps int64, seq *atomic.Int64, op Op) Sample {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		budget   atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Pointer[string]
		mu       sync.Mutex
		all      []time.Duration
		wg       sync.WaitGroup
	)
	budget.Store(maxOps)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			for ctx.Err() == nil && budget.Add(-1) >= 0 {
				i := seq.Add(1) - 1
				t0 := time.Now()
				err := op(ctx, w, i)
				if ctx.Err() != nil && err != nil {
					break // cut short by the end of the phase: neither a result nor a failure
				}
				lat = append(lat, time.Since(t0))
				if err != nil {
					if errs.Add(1) == 1 {
						msg := err.Error()
						firstErr.Store(&msg)
					}
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	s := summarize(all, time.Since(start))
	s.Errs = errs.Load()
	if p := firstErr.Load(); p != nil {
		s.FirstErr = *p
	}
	return s
}

// summarize computes the rate and percentiles of latencies observed over elapsed.
func summarize(lat []time.Duration, elapsed time.Duration) Sample {
	slices.Sort(lat)
	s := Sample{Ops: int64(len(lat)), Elapsed: elapsed, ItemsPerOp: 1, latencies: lat}
	if elapsed > 0 {
		s.Rate = float64(len(lat)) / elapsed.Seconds()
	}
	s.P50, s.P99, s.P999 = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 0.999)
	return s
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianSample returns a Sample whose every figure is the median of that figure over the runs.
func medianSample(runs []Sample) Sample {
	if len(runs) == 0 {
		return Sample{}
	}
	pick := func(f func(Sample) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	dur := func(f func(Sample) time.Duration) time.Duration {
		return time.Duration(pick(func(s Sample) float64 { return float64(f(s)) }))
	}
	m := Sample{
		Ops:        int64(pick(func(s Sample) float64 { return float64(s.Ops) })),
		Elapsed:    dur(func(s Sample) time.Duration { return s.Elapsed }),
		P50:        dur(func(s Sample) time.Duration { return s.P50 }),
		P99:        dur(func(s Sample) time.Duration { return s.P99 }),
		P999:       dur(func(s Sample) time.Duration { return s.P999 }),
		Rate:       pick(func(s Sample) float64 { return s.Rate }),
		ItemsPerOp: runs[0].ItemsPerOp,
		CPU:        pick(func(s Sample) float64 { return s.CPU }),
		RSS:        int64(pick(func(s Sample) float64 { return float64(s.RSS) })),
	}
	for _, r := range runs {
		m.Errs += r.Errs // errors are summed, not medianed: one failing run must show
		if m.FirstErr == "" {
			m.FirstErr = r.FirstErr
		}
	}
	for k := range runs[0].Extra {
		if m.Extra == nil {
			m.Extra = map[string]float64{}
		}
		m.Extra[k] = pick(func(s Sample) float64 { return s.Extra[k] })
	}
	return m
}

// medianRatio returns the median over runs of a[i]/b[i]: ratios are taken inside each run, where both sides
// shared the same machine state, and only then summarized.
func medianRatio(a, b []Sample, f func(Sample) float64) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		if d := f(b[i]); d > 0 {
			xs = append(xs, f(a[i])/d)
		}
	}
	return median(xs)
}

// Formatting helpers for tables.

func fmtRate(r float64) string {
	switch {
	case r >= 100_000:
		return fmt.Sprintf("%.0fk", r/1000)
	case r >= 10_000:
		return fmt.Sprintf("%.1fk", r/1000)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*r)
}

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	default:
		return fmt.Sprintf("%d B", b)
	}
}

func fmtErrs(s Sample) string {
	if s.Errs == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", s.Errs, truncate(s.FirstErr, 60))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
