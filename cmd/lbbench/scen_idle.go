package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// Idle subscribers (the live-at-scale issue): as many topUpdates subscribers as one server process can hold (one
// websocket each, from several loopback source addresses), what each costs the server, and how fast a write
// reaches all of them.
const (
	idleTarget      = 100_000
	idleConnectIn   = 60 * time.Second
	idleBytesEach   = 20 << 10
	idleReachIn     = time.Second
	idleSources     = 4    // loopback source addresses (127.0.0.1 ...)
	idleFDReserve   = 1500 // open files the server and this process keep for everything else
	idleSubmissions = 10   // written after connecting, 10 a second; the 10th is sampled at every subscriber
)

// idleStep connects the subscribers, measures the server's RSS, goroutines and heap per subscriber, then makes
// idleSubmissions submissions taking rank 1 and measures when every subscriber received the sampled one.
func (e *env) idleStep(ctx context.Context) (*table, error) {
	n := idleTarget
	if e.o.Quick {
		n = 2000
	}
	limited := false
	if e.nofile > 0 && n > e.nofile-idleFDReserve {
		n, limited = e.nofile-idleFDReserve, true
	}
	sv := e.newSvc()
	board := "idle"
	if err := e.seedFanoutBoard(ctx, sv, board); err != nil {
		return nil, err
	}
	g0, h0, err := e.serverGauges(ctx)
	if err != nil {
		return nil, err
	}
	st0, err := e.serverGauge(ctx, "go_memstats_stack_inuse_bytes")
	if err != nil {
		return nil, err
	}
	rss0 := sv.usage().RSS
	times, err := newRespTimes(e.dir, 1, idleSubmissions+2)
	if err != nil {
		return nil, err
	}
	defer times.remove()
	f := newFanout(board, times, 0)
	for i := range idleSources {
		f.sources = append(f.sources, net.IPv4(127, 0, 0, byte(1+i)))
	}
	defer f.close()
	start := time.Now()
	if err := f.connect(ctx, []string{"ws://" + sv.addr + "/graphql"}, n); err != nil {
		return nil, fmt.Errorf("idle subscribers: %w", err)
	}
	connected := time.Since(start)
	time.Sleep(2 * time.Second) // the last connections' first responses settle
	rss1 := sv.usage().RSS
	g1, h1, err := e.serverGauges(ctx)
	if err != nil {
		return nil, err
	}
	st1, err := e.serverGauge(ctx, "go_memstats_stack_inuse_bytes")
	if err != nil {
		return nil, err
	}
	e.logf("idle: %d subscribers connected in %s, server RSS %s → %s", n, connected.Round(time.Millisecond),
		fmtBytes(rss0), fmtBytes(rss1))
	if e.pprofAddr != "" {
		file := filepath.Join(e.dir, fmt.Sprintf("idle-%d.heap.pprof", n))
		if err := fetch(ctx, "http://"+e.pprofAddr+"/debug/pprof/heap", file); err != nil {
			e.logf("profile %s: %v", file, err)
		}
	}
	s, err := e.fanoutRun(ctx, []*fanout{f}, 1, idleSubmissions, idleSubmissions, e.standaloneTarget(sv))
	if err != nil {
		return nil, err
	}
	x := s.Extra
	per := func(a, b float64) string { return fmtBytes(int64((b - a) / float64(n))) }
	t := &table{title: "5d. Idle subscribers: topUpdates(first:10), one websocket each, then one write",
		head: []string{"subscribers", "connected in", "server RSS (before → after)", "RSS each", "heap each",
			"stacks each", "goroutines each", "a write reaches all: p50", "p99", "seen", "converged"}}
	t.add(fmt.Sprint(n), fmtDur(connected), fmtBytes(rss0)+" → "+fmtBytes(rss1), per(float64(rss0), float64(rss1)),
		per(h0, h1), per(st0, st1), fmt.Sprintf("%.2f", (g1-g0)/float64(n)), fmtDur(s.P50), fmtDur(s.P99),
		fmt.Sprintf("%.2f%%", 100*x["seen"]), fmt.Sprintf("%.0f/%d", x["converged"], n))
	t.notes = append(t.notes, fmt.Sprintf("Subscribers connect from %d loopback source addresses, 32 at a time; "+
		"connected: until every one has its snapshot. RSS, heap in use (go_memstats_heap_inuse_bytes), goroutine "+
		"stacks (go_memstats_stack_inuse_bytes) and goroutines of the server before connecting and 2 s after the "+
		"last snapshot; the step runs right after the churn, on a server that has held nothing bigger. Then %d submissions at %d/s each take rank "+
		"1; \"reaches\" is the time from the last one's HTTP response until each subscriber holds it.",
		idleSources, idleSubmissions, idleSubmissions))
	count := fmt.Sprint(n)
	if limited {
		count = fmt.Sprintf("%d (RLIMIT_NOFILE %d bounds one process; %d cannot be held here)", n, e.nofile, idleTarget)
	}
	each := (float64(rss1) - float64(rss0)) / float64(n)
	e.check(fmt.Sprintf("%d idle subscribers on one server process", idleTarget),
		fmt.Sprintf("connected within %s; server RSS ≤ %s each; a write reaches them within %s", fmtDur(idleConnectIn),
			fmtBytes(idleBytesEach), fmtDur(idleReachIn)),
		fmt.Sprintf("%s subscribers in %s, %s each, p99 %s, converged %.0f", count, fmtDur(connected),
			fmtBytes(int64(each)), fmtDur(s.P99), x["converged"]),
		!limited && connected <= idleConnectIn && each <= idleBytesEach && s.P99 <= idleReachIn &&
			int(x["converged"]) == n)
	return t, nil
}
