package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary be the tool's children too, as the lbbench binary is (they start os.Executable
// with a role set: runRole).
func TestMain(m *testing.M) {
	runRole()
	os.Exit(m.Run())
}

// TestSubmitTo runs the fan-out steps' submissions, in this process and from the submitting child, against two
// recording HTTP servers: every planned submission arrives once, at the server whose turn it is, with its player
// and score; every response time written into the shared slots lies between the server's answer and the end of
// the run, and the slots of submissions outside the window stay empty.
func TestSubmitTo(t *testing.T) {
	for _, process := range []bool{false, true} {
		t.Run(fmt.Sprintf("process=%v", process), func(t *testing.T) { testSubmitTo(t, process) })
	}
}

func testSubmitTo(t *testing.T, process bool) {
	type got struct {
		board, player string
		score         float64
		answered      int64 // unix ns, just before the response was written
	}
	var mu sync.Mutex
	received := [2][]got{}
	server := func(i int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Query     string
				Variables struct {
					In struct {
						Board, PlayerID string
						Score           float64
					}
				}
			}
			body, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(body, &req); err != nil || req.Query != submitMutation ||
				r.Header.Get("Authorization") != "Bearer "+submitKey {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			in := req.Variables.In
			mu.Lock()
			received[i] = append(received[i], got{in.Board, in.PlayerID, in.Score, time.Now().UnixNano()})
			mu.Unlock()
			fmt.Fprintf(w, `{"data":{"submitScore":{"entry":{"rank":1,"score":%v},"previousRank":null,"updated":true}}}`, in.Score)
		}))
	}
	s0, s1 := server(0), server(1)
	defer s0.Close()
	defer s1.Close()
	servers := []*service{{addr: strings.TrimPrefix(s0.URL, "http://")}, {addr: strings.TrimPrefix(s1.URL, "http://")}}
	for _, sv := range servers {
		sv.hot = newRawHTTP(sv.addr, "/graphql")
	}

	const boards, slots, first, last = 3, 30, 5, 24
	times, err := newRespTimes(t.TempDir(), boards, slots)
	if err != nil {
		t.Fatal(err)
	}
	defer times.remove()
	fs := make([]*fanout, boards)
	for b := range fs {
		fs[b] = newFanout(fmt.Sprintf("b%d", b), times, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, lastGot, cpu, err := submitTo(ctx, fs, first, last, 2000, 30*time.Second, servers, process)
	end := time.Now().UnixNano()
	if err != nil {
		t.Fatal(err)
	}
	want := int64(boards * (last - first + 1))
	if s.Ops != want || s.Errs != 0 || lastGot != last || s.P99 <= 0 || (cpu > 0) != process {
		t.Fatalf("ops %d errors %d (%s), last %d, p99 %s, cpu %s; want %d ops, no errors, last %d, a p99 and a CPU time of the child's only",
			s.Ops, s.Errs, s.FirstErr, lastGot, s.P99, cpu, want, last)
	}
	// Submission j (over all boards) is board j % boards, k = first + j / boards, on server j % 2.
	answered := map[string]int64{}
	for i, list := range received {
		for _, g := range list {
			k := int64(g.score) - fanoutBase
			b := -1
			fmt.Sscanf(g.board, "b%d", &b)
			j := (k-first)*boards + int64(b)
			key := fmt.Sprintf("%s/%d", g.board, k)
			if b < 0 || k < first || k > last || int(j%2) != i || g.player != fmt.Sprintf("f%d", k%fanoutPlayers) {
				t.Errorf("server %d got %+v: not a planned submission of its turn", i, g)
			}
			if _, dup := answered[key]; dup {
				t.Errorf("%s submitted twice", key)
			}
			answered[key] = g.answered
		}
	}
	if int64(len(answered)) != want {
		t.Errorf("%d distinct submissions arrived, want %d", len(answered), want)
	}
	for b, f := range fs {
		for k := range int64(slots) {
			r := f.resp[k].Load()
			if k < first || k > last {
				if r != 0 {
					t.Errorf("board %d slot %d outside the window holds %d", b, k, r)
				}
				continue
			}
			at := answered[fmt.Sprintf("b%d/%d", b, k)]
			if r < at || r > end {
				t.Errorf("board %d submission %d: response time %d not between the answer %d and the end %d", b, k, r, at, end)
			}
		}
	}

	// Submissions past the slots are refused before any is sent, and so is a spec the child cannot carry out.
	if _, _, _, err = submitTo(ctx, fs, first, slots, 2000, time.Second, servers, process); err == nil ||
		!strings.Contains(err.Error(), "no response slot") {
		t.Errorf("submissions past the slots: %v, want a refusal", err)
	}
	if process {
		_, err := runSubmitter(ctx, submitSpec{Servers: []string{servers[0].addr}, Boards: []string{"b0"},
			RespFile: times.path, Slots: 1000, Rate: 1, Last: 10})
		if err == nil || !strings.Contains(err.Error(), "too small") {
			t.Errorf("a spec larger than its file: %v, want the child's refusal", err)
		}
	}
}
