package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// The HTTP floor (-floor): a net/http server that answers every POST /graphql with fixed bytes, which the
// benchmark sets before each step to the new server's own answer to a request of that step. It does what any
// server on net/http must do for a request (read it and its body, write an answer, with the server's deadlines)
// and nothing else: its throughput under the same load is the ceiling of any server built on net/http on this
// machine, and its CPU per request the part of the server's that no change above net/http can remove.

// floorRole is the environment variable that makes this binary the floor server, listening on its value.
const floorRole = "LBBENCH_FLOOR"

// floorHandler serves the floor: POST /graphql answers the reply, PUT /reply replaces it, GET /readyz is 200.
// One handler without a mux: the floor adds nothing to net/http's own work.
type floorHandler struct {
	reply atomic.Pointer[[]byte]
}

func (h *floorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/graphql":
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if b := h.reply.Load(); b != nil {
			w.Write(*b)
		}
	case r.Method == http.MethodPut && r.URL.Path == "/reply":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.reply.Store(&b)
	case r.URL.Path == "/readyz":
	default:
		http.NotFound(w, r)
	}
}

// floorMain is the floor server's process. Its http.Server has the leaderboard server's settings and default
// timeouts (internal/server's serve.go and config.go): the per-request deadlines are part of what it costs.
func floorMain(addr string) error {
	srv := &http.Server{Addr: addr, Handler: &floorHandler{}, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 1 << 20}
	return srv.ListenAndServe()
}

// startFloor runs this binary as the floor server on a free loopback port.
func (e *env) startFloor(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c, err := spawn("floor", filepath.Join(e.dir, "floor.log"), []string{floorRole + "=" + addr}, self)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, c, addr); err != nil {
		c.stop()
		return fmt.Errorf("floor server: %w", err)
	}
	e.floor = &service{name: "floor", desc: "net/http, fixed reply", proc: c, addr: addr, hot: newRawHTTP(addr, "/graphql")}
	e.logf("floor server: pid %d on %s", c.pid(), addr)
	return nil
}

// floorSide measures the floor on the load of one step: sample is a request body of the step, which the new
// server answers once to give the floor its reply; op drives the floor like the servers (a fresh body a request).
func (e *env) floorSide(ctx context.Context, st Step, sample []byte, key string, op func(sv *service) Op) (Sample, error) {
	reply, err := e.newSvc().hot.post(ctx, 0, key, sample)
	if err != nil {
		return Sample{}, fmt.Errorf("floor: the new server's reply: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+e.floor.addr+"/reply", bytes.NewReader(reply))
	if err != nil {
		return Sample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("floor: setting its reply: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("floor: setting its reply: HTTP %d", resp.StatusCode)
	}
	return e.stepOn(ctx, e.floor, st, op(e.floor)), nil
}

// floorLabel and floorNote describe the floor side in the tables.
const (
	floorLabel = "floor: net/http, fixed reply"
	floorNote  = "floor: net/http, fixed reply = a net/http server (this tool re-run, same http.Server settings and " +
		"timeouts as the leaderboard server's defaults) that reads each request and its body and answers it with " +
		"the new server's answer to one request of the step, nothing else; measured after the other sides in " +
		"every round, with the same clients and request bodies. Its throughput is the ceiling of any server on " +
		"net/http on this machine for that load (a server that also does the step's work, Redis included, stays " +
		"below it); \"of floor\": the share of it a server reaches; its CPU per request is the part of a " +
		"server's that no change above net/http removes."
)

// cmpTable is newCmpTable with the floor's "of floor" column and note when -floor is on.
func (e *env) cmpTable(title, keyHead, unit, per string, raws []string) *cmpTable {
	if e.floor == nil {
		return newCmpTable(title, keyHead, unit, per, raws)
	}
	ct := newCmpTable(title, keyHead, unit, per, append(raws, "floor"))
	ct.notes = append(ct.notes, floorNote)
	return ct
}

// withFloor adds the floor's side, measured in the runs fl, to a step's sides when -floor is on.
func (e *env) withFloor(sides []side, fl []Sample) []side {
	if e.floor == nil {
		return sides
	}
	return append(sides, side{label: floorLabel, short: "floor", runs: fl, server: true})
}
