package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// The tests change the process's GOGC, so none runs in parallel, and each gives it back.

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, roots uint64
		base               int
	}{
		{64 * mib, 10 * mib, 0, 100},
		{64 * mib, 10 * mib, mib, 100},
		{64 * mib, 10 * mib, 30 * mib, 100},
		{64 * mib, 1, 0, 100},
		{64 * mib, 0, 0, 100},
		{64 * mib, 0, 200 << 10, 100},
		{64 * mib, 31 * mib, 0, 100},
		{64 * mib, 32 * mib, 0, 100}, // GOGC=100 reaches the floor exactly
		{64 * mib, 31 * mib, 2 * mib, 100},
		{64 * mib, 33 * mib, 0, 100},
		{64 * mib, 64 * mib, 0, 100},
		{64 * mib, 500 * mib, mib, 100},
		{64 * mib, 10 * mib, 0, 2000}, // the process's GOGC already goes beyond the floor
		{64 * mib, 10 * mib, 0, 50},
		{64 * mib, 63 * mib, 0, 1},
		{3 * mib, 0, 0, 100}, // below the runtime's own minimum heap
		{1 << 50, 3, 0, 100},
	} {
		p := Percent(c.floor, c.live, c.roots, c.base)
		// The runtime's heap goal at GOGC p (mgcpacer.go): live + (live + roots)·p/100, at least 4 MiB·p/100.
		goal := func(p int) float64 {
			return max(float64(c.live)+float64(c.live+c.roots)*float64(p)/100, 4*mib*float64(p)/100)
		}
		if p < c.base {
			t.Errorf("%+v: GOGC %d below the process's own", c, p)
		} else if p == math.MaxInt32 {
			if goal(p) >= float64(c.floor) {
				t.Errorf("%+v: GOGC at its bound although that reaches the floor", c)
			}
		} else if p > c.base && (goal(p) < float64(c.floor) || goal(p-1) >= float64(c.floor)) {
			t.Errorf("%+v: GOGC %d: goal %.0f (with %d: %.0f), want the smallest reaching %d", c, p, goal(p), p-1,
				goal(p-1), c.floor)
		} else if p == c.base && goal(p) < float64(c.floor) {
			t.Errorf("%+v: GOGC %d: goal %.0f below the floor", c, p, goal(p))
		}
	}
}

func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

var sink []byte

// garbage allocates n bytes in 4 KiB pieces that die at once and returns the collections that ran meanwhile.
func garbage(n int) uint32 {
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	before := st.NumGC
	for i := 0; i < n/4096; i++ {
		sink = make([]byte, 4096)
	}
	sink = nil
	runtime.ReadMemStats(&st)
	return st.NumGC - before
}

// waitCycle runs collections until the floor has seen one more than it had, within a generous bound.
func waitCycle(t *testing.T, f *Floor) {
	t.Helper()
	n := f.Cycles()
	deadline := time.Now().Add(10 * time.Second)
	for f.Cycles() == n {
		if time.Now().After(deadline) {
			t.Fatalf("the floor saw no collection in 10 s (cycles %d)", n)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestFloorCollectsLessOften(t *testing.T) {
	base := gogc()
	const floor = 64 << 20
	runtime.GC()
	without := garbage(256 << 20)

	f := Start(floor)
	if f == nil {
		t.Fatal("Start returned nil with a floor and GOGC on")
	}
	defer f.Stop()
	waitCycle(t, f)
	if g := heapGoal(); g < floor || g > floor*11/10 {
		t.Errorf("heap goal %d after a collection, want the floor %d (at most 10%% more)", g, floor)
	}
	if p := gogc(); p <= base || p != f.Percent() {
		t.Errorf("GOGC %d with the floor (Percent %d), want above the process's %d", p, f.Percent(), base)
	}
	with := garbage(256 << 20)
	t.Logf("collections for 256 MiB of garbage: %d without the floor, %d with a floor of 64 MiB", without, with)
	if with*4 > without || with == 0 {
		t.Errorf("with the floor %d collections for 256 MiB of garbage, without it %d: want at most a quarter (and some: the goal is the floor)", with,
			without)
	}

	f.Stop()
	if p := gogc(); p != base {
		t.Errorf("GOGC %d after Stop, want the process's %d back", p, base)
	}
	n := f.Cycles()
	runtime.GC()
	runtime.GC()
	if p := gogc(); p != base || f.Cycles() != n {
		t.Errorf("after Stop and two collections: GOGC %d (want %d), cycles %d → %d (want none)", p, base, n,
			f.Cycles())
	}
	f.Stop() // twice: nothing more
}

func TestFloorLeavesLargeHeapsToGOGC(t *testing.T) {
	base := gogc()
	const floor = 32 << 20
	f := Start(floor)
	defer f.Stop()
	live := make([][]byte, 48)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	waitCycle(t, f)
	if p := f.Percent(); p != base || gogc() != base {
		t.Errorf("48 MiB live over a 32 MiB floor: GOGC %d (Percent %d), want the process's %d", gogc(), p, base)
	}
	runtime.KeepAlive(live)
	live = nil
	waitCycle(t, f)
	waitCycle(t, f) // the first may have begun while live was still held
	if p := f.Percent(); p <= base {
		t.Errorf("the large heap freed: GOGC %d, want above the process's %d again", p, base)
	}
}

func TestStartWithoutFloor(t *testing.T) {
	base := gogc()
	if f := Start(0); f != nil {
		f.Stop()
		t.Error("Start(0) returned a floor")
	}
	debug.SetGCPercent(-1)
	f := Start(64 << 20)
	if gogc() != -1 {
		t.Errorf("with GOGC=off Start set GOGC %d", gogc())
	}
	debug.SetGCPercent(base)
	if f != nil {
		f.Stop()
		t.Error("Start returned a floor with GOGC=off")
	}
	var nilFloor *Floor
	nilFloor.Stop() // safe
}

// GOMEMLIMIT still bounds the heap: a floor above the memory limit does not hold the collector off past it.
func TestFloorUnderAMemoryLimit(t *testing.T) {
	const limit = 24 << 20
	old := debug.SetMemoryLimit(limit)
	defer debug.SetMemoryLimit(old)
	f := Start(256 << 20)
	defer f.Stop()
	waitCycle(t, f)
	if g := heapGoal(); g > limit {
		t.Errorf("heap goal %d with a floor of 256 MiB under a memory limit of %d: above the limit", g, limit)
	}
	if n := garbage(256 << 20); n < 8 {
		t.Errorf("%d collections for 256 MiB of garbage under a 24 MiB memory limit, want at least 8", n)
	}
}
