package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The ledger scenario's control for the restore (table 7d): the closed-loop writers on other boards beside a
// process that only burns CPU, as much as a restore takes, and touches no Redis, PostgreSQL or server. What the
// writers lose then is what any work of that size costs them on this machine, whatever does it.

// burnRole is the environment variable that makes this binary (or the test binary) a CPU burner: it keeps its
// value in cores busy, in burnPeriod periods, until it is killed.
const burnRole = "LBBENCH_BURN"

// burnPeriod is a burner thread's cycle: busy for its share of it, then asleep. A restore's script calls, and
// its rests between them, are a few milliseconds each.
const burnPeriod = 10 * time.Millisecond

// burnCores are the burners of table 7d, in cores: half and all of what the restore took in the runs of 7b.
var burnCores = []float64{0.2, 0.4}

// burnMain keeps cores (its argument) busy: ceil(cores) threads, each busy for cores/ceil(cores) of every period.
func burnMain(arg string) error {
	cores, err := strconv.ParseFloat(arg, 64)
	if err != nil || cores <= 0 || cores > 64 {
		return fmt.Errorf("%s=%q: want cores in (0, 64]", burnRole, arg)
	}
	n := int(math.Ceil(cores))
	busy := time.Duration(cores / float64(n) * float64(burnPeriod))
	runtime.GOMAXPROCS(n + 1)
	for range n {
		go func() {
			runtime.LockOSThread()
			next := time.Now()
			for {
				// Busy for its share of CPU time, not of wall time: on a machine whose other processes keep it
				// busy the burner still takes what it asks, as a restore paced to its rate does.
				for start := threadCPU(); threadCPU()-start < busy; {
				}
				next = next.Add(burnPeriod)
				if now := time.Now(); now.After(next) {
					next = now // the share took longer than the period: go on at once, without catching up
				}
				time.Sleep(time.Until(next))
			}
		}()
	}
	select {}
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// burnSet is what the writers did beside a burner, run after run.
type burnSet struct {
	used           []float64 // the burner's cores, each run
	shares         []float64 // the writers' rate during/before, each run
	before, during []Sample
}

// burnRounds measures the closed-loop writers (outcomes in m, already writing) beside each burner of burnCores,
// Runs times each: a span without it, then one with it. It adds a row of bt per burner.
func (e *env) burnRounds(ctx context.Context, on *service, db *ledgerDB, m *meter, bt *table) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	for _, cores := range burnCores {
		var set burnSet
		for r := 0; r < e.o.Runs; r++ {
			m.take()
			c0 := e.cpuSnap(on, db)
			if err := sleepCtx(ctx, e.o.Duration); err != nil {
				return err
			}
			b := m.take()
			b.Extra = c0.cores(e.cpuSnap(on, db))
			burner, err := spawn("burner", filepath.Join(e.dir, "burner.log"),
				[]string{burnRole + "=" + strconv.FormatFloat(cores, 'f', -1, 64)}, bin)
			if err != nil {
				return err
			}
			m.take()
			c0 = e.cpuSnap(on, db)
			u0, err0 := readProcUsage(burner.pid())
			err = sleepCtx(ctx, e.o.Duration)
			u1, err1 := readProcUsage(burner.pid())
			d := m.take()
			d.Extra = c0.cores(e.cpuSnap(on, db))
			gone := burner.exited()
			burner.stop()
			switch {
			case err != nil:
				return err
			case gone || err0 != nil || err1 != nil:
				return fmt.Errorf("burner (see burner.log): exited %v, %v, %v", gone, err0, err1)
			}
			used := (u1.CPU - u0.CPU).Seconds() / d.Elapsed.Seconds()
			e.logf("burner %.2f cores (used %.2f): other boards %s → %s writes/s (p99 %s → %s)", cores, used,
				fmtRate(b.Rate), fmtRate(d.Rate), fmtDur(b.P99), fmtDur(d.P99))
			set.used = append(set.used, used)
			set.before, set.during = append(set.before, b), append(set.during, d)
			if b.Rate > 0 {
				set.shares = append(set.shares, d.Rate/b.Rate)
			}
		}
		b, d := medianSample(set.before), medianSample(set.during)
		used := median(set.used)
		bt.add(fmt.Sprintf("%.1f", cores), fmt.Sprintf("%.2f", used),
			fmt.Sprintf("%s → %s", fmtRate(b.Rate), fmtRate(d.Rate)), fmtTimes(median(set.shares)),
			fmtTimes(1-used/float64(runtime.NumCPU())), fmt.Sprintf("%s → %s", fmtDur(b.P99), fmtDur(d.P99)),
			fmtCoreSet(b.Extra), fmtCoreSet(d.Extra), fmtErrs(sumErrs(b, d)))
	}
	bt.notes = append(bt.notes, fmt.Sprintf("The closed-loop writers of table 7b's first row, on the same boards, "+
		"with no restore: %d time(s) for each burner, they write for %s without it, then for %s beside a process "+
		"(this binary, %s) that keeps the cores asked busy (threads each busy for its share of every %s, in CPU "+
		"time, and asleep the rest) and reads or writes nothing. Burner used: its CPU time (/proc) over the span. The model: "+
		"writers that keep a machine of C cores (here %d) busy keep 1 − R/C of their rate beside work of R cores. "+
		"The restore of table 7b took about 0.4 of a core (its own CPU: the cores during, less the writers' share "+
		"of the cores before); a burner of that size shows what work of that size costs the writers on this "+
		"machine, whatever does it. Medians of the runs; during/before the median of per-run ratios; CPU as in 7b "+
		"(the burner is not among the four processes, but in the machine's figure).",
		e.o.Runs, e.o.Duration, e.o.Duration, burnRole, burnPeriod, runtime.NumCPU()))
	return nil
}
