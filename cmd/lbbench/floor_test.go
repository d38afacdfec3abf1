package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFloor starts the floor server (this test binary re-run, see TestMain) next to a stand-in for the new server
// and measures it on a step: the floor answers every request with exactly the bytes the new server gave for the
// step's sample request (200, application/json), asking the new server once; it reads every request body whole,
// and the sample carries the floor's CPU. A second step gets the new server's answer to its own sample.
func TestFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var asked atomic.Int64
	newSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		asked.Add(1)
		w.Header().Set("Content-Type", "application/graphql-response+json") // the floor answers application/json
		fmt.Fprintf(w, `{"data":{"echo":%q,"auth":%q}}`, body, r.Header.Get("Authorization"))
	}))
	defer newSrv.Close()
	e, err := newEnv(ctx, options{Quick: true, Duration: 300 * time.Millisecond, Runs: 1, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	nw := &service{name: "new", addr: strings.TrimPrefix(newSrv.URL, "http://")}
	nw.hot = newRawHTTP(nw.addr, "/graphql")
	e.svcs = []*service{nw}
	if err := e.startFloor(ctx); err != nil {
		t.Fatal(err)
	}

	for _, sample := range []string{`{"query":"one"}`, `{"query":"two, a longer one"}`} {
		var bodies atomic.Int64
		op := func(sv *service) Op {
			return func(ctx context.Context, w int, i int64) error {
				body := []byte(fmt.Sprintf(`{"query":"request %d"}`, i))
				got, err := sv.hot.post(ctx, w, "k", body)
				if err != nil {
					return err
				}
				want := fmt.Sprintf(`{"data":{"echo":%q,"auth":"Bearer k"}}`, sample)
				if string(got) != want {
					return fmt.Errorf("floor answered %s, want %s", got, want)
				}
				bodies.Add(1)
				return nil
			}
		}
		before := asked.Load()
		s, err := e.floorSide(ctx, Step{Workers: 4, Duration: 300 * time.Millisecond, MaxOps: 1 << 40},
			[]byte(sample), "k", op)
		if err != nil {
			t.Fatal(err)
		}
		if s.Errs > 0 || s.Ops == 0 || bodies.Load() == 0 {
			t.Fatalf("floor step: %d ops, %d errors (%s)", s.Ops, s.Errs, s.FirstErr)
		}
		if n := asked.Load() - before; n != 1 {
			t.Errorf("the new server was asked %d times for the floor's reply, want once", n)
		}
		if s.CPU <= 0 {
			t.Errorf("floor step without the floor's CPU: %+v", s)
		}
	}

	// What a client sees: status, Content-Type, and a body that is read whole (a large one too).
	big := bytes.Repeat([]byte("x"), 1<<20)
	resp, err := http.Post("http://"+e.floor.addr+"/graphql", "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(string(got), "a longer one") {
		t.Errorf("floor: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	if resp, err := http.Get("http://" + e.floor.addr + "/graphql"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /graphql: %v %v, want 404", resp, err)
	}
}
