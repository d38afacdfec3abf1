package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Subscription churn (the live-at-scale issue): churnRate subscribe/complete cycles per second for the step's
// duration over churnConns websockets, then whether the server is back to its goroutines and heap from before.
const (
	churnRate       = 1000 // cycles per second
	churnConns      = 50
	churnGoroutines = 10               // goroutines the server may hold above its count before, after the churn
	churnHeap       = 16 << 20         // bytes of heap in use it may hold above it (or a quarter more, if larger)
	churnFor        = 10 * time.Second // how long the churn lasts (-quick: the step duration)
)

// churnStep runs the churn and reports it as a table.
func (e *env) churnStep(ctx context.Context) (*table, error) {
	board := "churn"
	if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: board}); err != nil {
		return nil, err
	}
	// The baseline once the earlier steps' connections are gone: the count has stopped falling for a second.
	g0, h0, err := e.serverGauges(ctx)
	for deadline := time.Now().Add(15 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		var g float64
		if g, h0, err = e.serverGauges(ctx); err == nil && g >= g0 {
			break
		}
		g0 = g
	}
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	url := "ws://" + e.newSvc().addr + "/graphql"
	var done, failed atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	per := time.Duration(float64(time.Second) * churnConns / churnRate) // each connection's cycle period
	dur := churnFor
	if e.o.Quick {
		dur = e.o.Duration
	}
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for c := range churnConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, _, err := d.DialContext(ctx, url, nil)
			if err != nil {
				fail(err)
				return
			}
			defer ws.Close()
			read := func(want string) error {
				ws.SetReadDeadline(time.Now().Add(10 * time.Second))
				for {
					_, data, err := ws.ReadMessage()
					if err != nil {
						return err
					}
					if bytes.Contains(data, []byte(`"type":"`+want+`"`)) {
						return nil
					}
				}
			}
			if ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_init"}`)) != nil || read("connection_ack") != nil {
				fail(fmt.Errorf("connection %d: no connection_ack", c))
				return
			}
			t := time.NewTicker(per)
			defer t.Stop()
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				id := strconv.Itoa(i)
				sub := `{"type":"subscribe","id":"` + id + `","payload":{"query":"subscription { topUpdates(board: \"` +
					board + `\") { version } }"}}`
				if err := ws.WriteMessage(websocket.TextMessage, []byte(sub)); err != nil {
					fail(err)
					return
				}
				if err := read("next"); err != nil {
					fail(err)
					return
				}
				if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"complete","id":"`+id+`"}`)); err != nil {
					fail(err)
					return
				}
				done.Add(1)
				<-t.C
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	// Back to what it held before? Give the server's goroutines a few seconds to return.
	var g1, h1 float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if g1, h1, err = e.serverGauges(ctx); err != nil {
			return nil, err
		}
		if g1 <= g0+churnGoroutines || time.Now().After(deadline) {
			break
		}
	}
	t := &table{title: fmt.Sprintf("5b. Subscription churn: %d subscribe/complete cycles per second over %d websockets",
		churnRate, churnConns),
		head: []string{"cycles", "cycles/s", "server goroutines (before → after)", "heap in use (before → after)", "errors"}}
	errs := strconv.FormatInt(failed.Load(), 10)
	if s, ok := firstErr.Load().(string); ok {
		errs += " (" + truncate(s, 80) + ")"
	}
	t.add(strconv.FormatInt(done.Load(), 10), fmtRate(float64(done.Load())/elapsed.Seconds()),
		fmt.Sprintf("%.0f → %.0f", g0, g1), fmtBytes(int64(h0))+" → "+fmtBytes(int64(h1)), errs)
	t.notes = append(t.notes, "It runs before the fan-out steps, on a server holding nothing else. After the churn "+
		"the step waits up to 10 s for the server's goroutines to return. "+
		"Goroutines and heap from the server's /metrics (go_goroutines, go_memstats_heap_inuse_bytes); the heap "+
		"figure is whatever the last GC left, so it bounds a leak only coarsely.")
	heapSlack := max(churnHeap, h0/4)
	e.check(fmt.Sprintf("%d subscribe/unsubscribe cycles per second for %s", churnRate, dur),
		fmt.Sprintf("≥ 95%% of the cycles, goroutines ≤ before + %d, heap ≤ before + max(%s, 25%%)", churnGoroutines,
			fmtBytes(churnHeap)),
		fmt.Sprintf("%s cycles/s, goroutines %.0f → %.0f, heap %s → %s", fmtRate(float64(done.Load())/elapsed.Seconds()),
			g0, g1, fmtBytes(int64(h0)), fmtBytes(int64(h1))),
		float64(done.Load()) >= 0.95*churnRate*dur.Seconds() && failed.Load() == 0 &&
			g1 <= g0+churnGoroutines && h1 <= h0+heapSlack)
	return t, nil
}
