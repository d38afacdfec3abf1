package main

import "fmt"

// side is one way of doing a step's work, measured once in every run of the step.
type side struct {
	label string // row label
	short string // name in ratio columns ("raw", "script", "plain", "floor")
	runs  []Sample
	// server: the side is a server process of its own (the HTTP floor), whose CPU the rows show.
	server bool
}

// cmpTable is a -baseline comparison table: per step, one row for the new server, one for the baseline, one
// with the ratios new/base of every figure (each a median of per-run ratios: both binaries measured back to back
// in the same round), and one per raw side. keyHead names the step column (clients, items/call × callers, read),
// unit the throughput (req/s, scores/s) and per what CPU is counted (req, call); raws are the short names of the
// raw sides every row has, in order.
type cmpTable struct {
	*table
	raws []string
}

func newCmpTable(title, keyHead, unit, per string, raws []string) *cmpTable {
	head := []string{keyHead, "side", unit}
	for _, r := range raws {
		head = append(head, "of "+r)
	}
	head = append(head, "p50", "p99", "server CPU", "CPU µs/"+per+" (server / redis / loadgen)", "errors")
	t := &cmpTable{table: &table{title: title, head: head}, raws: raws}
	t.notes = append(t.notes, "new: the server built from this tree; base: the -baseline revision's build; both run "+
		"against the same redis-server, each with its own KEY_PREFIX, measured in alternating rounds (new then "+
		"base in the 1st, 3rd, ... run, base then new in the others, then the raw sides, once per run). Figures "+
		"are medians over the runs; new/base is the median of the "+
		"per-round ratios (throughput: > 1× is faster; latency and CPU: < 1× is better). \"of raw\": throughput as a "+
		"share of that raw side in the same round. CPU: server and redis-server and the load generator, µs per "+
		"operation from /proc; server CPU in cores.")
	return t
}

// add adds the rows of one step. rate is the throughput figure (Sample.Rate or Sample.ItemRate).
func (t *cmpTable) add(key string, nw, base []Sample, raws []side, rate func(Sample) float64) {
	svcRow := func(name string, runs []Sample) {
		m := medianSample(runs)
		row := []string{key, name, fmtRate(rate(m))}
		for _, r := range raws {
			row = append(row, fmtRatio(medianRatio(runs, r.runs, rate)))
		}
		row = append(row, fmtDur(m.P50), fmtDur(m.P99), fmtCores(m.CPU), cpuPerOp(m, true), fmtErrs(m))
		t.table.add(row...)
	}
	svcRow("new", nw)
	svcRow("base", base)
	ratio := func(f func(Sample) float64) string { return fmtTimes(medianRatio(nw, base, f)) }
	perOp := func(f func(Sample) float64) func(Sample) float64 {
		return func(s Sample) float64 {
			if s.Rate == 0 {
				return 0
			}
			return f(s) / s.Rate
		}
	}
	row := []string{key, "new/base", ratio(rate)}
	for range raws {
		row = append(row, "")
	}
	row = append(row, ratio(func(s Sample) float64 { return float64(s.P50) }),
		ratio(func(s Sample) float64 { return float64(s.P99) }),
		ratio(func(s Sample) float64 { return s.CPU }),
		ratio(perOp(func(s Sample) float64 { return s.CPU }))+" / "+
			ratio(perOp(func(s Sample) float64 { return s.Extra["redis_cpu"] }))+" / "+
			ratio(perOp(func(s Sample) float64 { return s.Extra["gen_cpu"] })), "")
	t.table.add(row...)
	for _, r := range raws {
		if len(r.runs) == 0 {
			continue // no such form for this step (e.g. friends has no plain sorted-set command)
		}
		m := medianSample(r.runs)
		row := []string{key, r.label, fmtRate(rate(m))}
		for range raws {
			row = append(row, "")
		}
		cores, cpu := "-", "- / "+cpuPerOp(m, false)
		if r.server {
			cores, cpu = fmtCores(m.CPU), cpuPerOp(m, true)
		}
		row = append(row, fmtDur(m.P50), fmtDur(m.P99), cores, cpu, fmtErrs(m))
		t.table.add(row...)
	}
}

// fmtTimes formats a ratio as a factor.
func fmtTimes(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}

// sumErrs returns s with the errors of others added (the first message kept): one errors column for several
// sides of a step.
func sumErrs(s Sample, others ...Sample) Sample {
	for _, o := range others {
		s.Errs += o.Errs
		if s.FirstErr == "" {
			s.FirstErr = o.FirstErr
		}
	}
	return s
}

// Targets of the hot-path issue, checked against the -baseline build in the same run (new/base of medians of
// per-round ratios).
const (
	submitSpeedup    = 2.0  // submitScore at 32 clients, req/s
	submitP99        = 10e6 // ns: its p99
	submitServerCPU  = 80.0 // µs of server CPU per submission
	submitRedisCPU   = 45.0 // µs of Redis CPU per submission
	readSpeedup      = 2.0  // rank, aroundMe, friends
	bulkSpeedup      = 2.0  // submitScores, scores/s
	bulkOfRaw        = 0.8  // submitScores: share of the raw pipelined script
	cachedTopSpeedup = 1.2  // cached top(first:10)
	p99Growth        = 2.0  // 128 clients: p99 at most this many times the 32-client p99
)

// vsBase is a step's figures against the baseline: the new median sample and the throughput ratio new/base.
type vsBase struct {
	s     Sample
	ratio float64
	// ceiling is the HTTP floor's throughput over the base's (median of per-round ratios; 0 without -floor): the
	// most any server on net/http could reach here against this base.
	ceiling float64
}

func compareBase(nw, base []Sample, rate func(Sample) float64) vsBase {
	return vsBase{s: medianSample(nw), ratio: medianRatio(nw, base, rate)}
}

// perOp is CPU in µs per operation of cores used at s's rate.
func perOp(s Sample, cores float64) float64 {
	if s.Rate == 0 {
		return 0
	}
	return cores / s.Rate * 1e6
}

// checkSpeedup records a "≥ min× the baseline" target, with the floor's ceiling when there is one.
func (e *env) checkSpeedup(name string, v vsBase, min float64) {
	e.check(name, fmt.Sprintf("≥ %.1f× base", min), v.text(), v.ratio >= min && v.s.Errs == 0)
}

// text is the ratio new/base, and the floor's over the base when there is one.
func (v vsBase) text() string {
	if v.ceiling > 0 {
		return fmtTimes(v.ratio) + " (floor " + fmtTimes(v.ceiling) + ")"
	}
	return fmtTimes(v.ratio)
}

// reqRate is a step's throughput in requests (or calls) per second.
func reqRate(s Sample) float64 { return s.Rate }
