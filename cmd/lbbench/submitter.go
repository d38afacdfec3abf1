package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// With -submit-process the fan-out steps' submissions come from a process of their own, as a game server's would,
// instead of from goroutines of the load generator that share its scheduler with the subscribers' readers. The
// two processes share the response times through a shared memory file (respTimes), so a subscriber still
// measures from the moment the submitter saw the response, with no relay in between. Without the flag the same
// loop runs in this process, on the same slots.

// submitterRole is the environment variable that makes this binary (or the test binary, see TestMain) the
// submitting child instead of the benchmark.
const submitterRole = "LBBENCH_SUBMITTER"

// respTimes is a shared memory file of unix-nanosecond response times, one slot per (board, submission).
type respTimes struct {
	path string
	mem  []byte
	n    int // slots per board
}

// newRespTimes creates the shared slots for boards boards of n submissions each, zeroed, in dir.
func newRespTimes(dir string, boards, n int) (*respTimes, error) {
	f, err := os.CreateTemp(dir, "lbbench-resp-*.bin")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := boards * n * 8
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	rt, err := mapRespTimes(f.Name(), n)
	if err != nil {
		os.Remove(f.Name())
	}
	return rt, err
}

func mapRespTimes(path string, n int) (*respTimes, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &respTimes{path: path, mem: mem, n: n}, nil
}

// board returns board b's slots. mmap returns page-aligned memory, so every slot is 8-byte aligned for atomics.
func (rt *respTimes) board(b int) []atomic.Int64 {
	return unsafe.Slice((*atomic.Int64)(unsafe.Pointer(&rt.mem[b*rt.n*8])), rt.n)
}

// remove deletes the file. The mapping stays for the life of the process: subscriber readers may still be
// finishing a message after their step closed them, and a step's slots are a few hundred KB at most.
func (rt *respTimes) remove() {
	os.Remove(rt.path)
}

// submitSpec is what the submitting child is asked to do: submissions first..last of every board (their
// response times into slot k of the board's slots in RespFile), at Rate per second in all, the boards taking
// turns, submission j to Servers[j % len(Servers)], handing none out after Budget.
type submitSpec struct {
	Servers  []string `json:"servers"` // host:port
	Boards   []string `json:"boards"`  // board b's slots are board b of RespFile
	RespFile string   `json:"resp_file"`
	Slots    int      `json:"slots"` // per board
	First    int64    `json:"first"`
	Last     int64    `json:"last"`
	Rate     int      `json:"rate"`
	Budget   int64    `json:"budget_ns"`
}

// submitReport is the child's answer.
type submitReport struct {
	Latencies []int64 `json:"lat_ns"` // one per completed submission, in no order
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_err,omitempty"`
	Issued    int64   `json:"issued"` // submissions handed out (over all boards)
	Elapsed   int64   `json:"elapsed_ns"`
	CPU       int64   `json:"cpu_ns"` // the child's own user + system time
}

// submitTo sends submissions first..last of every board of fs at rate per second in all (see submitSpec), from
// this process or, with process, from the submitting child, and returns their figures, the last submission every
// board got, and the child's CPU time (0 in this process: its CPU is this process's).
func submitTo(ctx context.Context, fs []*fanout, first, last int64, rate int, budget time.Duration,
	servers []*service, process bool) (Sample, int64, time.Duration, error) {
	spec := submitSpec{RespFile: fs[0].times.path, Slots: fs[0].times.n, First: first, Last: last, Rate: rate,
		Budget: int64(budget)}
	for i, f := range fs {
		if f.times != fs[0].times || f.slot != i {
			return Sample{}, 0, 0, fmt.Errorf("board %s: its response slots are not slot %d of one file", f.board, i)
		}
		spec.Boards = append(spec.Boards, f.board)
	}
	if last >= int64(spec.Slots) {
		return Sample{}, 0, 0, fmt.Errorf("submission %d has no response slot (%d per board)", last, spec.Slots)
	}
	for _, sv := range servers {
		spec.Servers = append(spec.Servers, sv.addr)
	}
	var rep submitReport
	if process {
		var err error
		if rep, err = runSubmitter(ctx, spec); err != nil {
			return Sample{}, 0, 0, err
		}
	} else {
		clients := make([]*rawHTTP, len(servers))
		for i, sv := range servers {
			clients[i] = sv.hot
		}
		resp := make([][]atomic.Int64, len(fs))
		for b, f := range fs {
			resp[b] = f.resp
		}
		rep = submitAll(ctx, spec, clients, resp)
		rep.CPU = 0
	}
	lat := make([]time.Duration, len(rep.Latencies))
	for i, ns := range rep.Latencies {
		lat[i] = time.Duration(ns)
	}
	s := summarize(lat, time.Duration(rep.Elapsed))
	s.Errs, s.FirstErr = rep.Errors, rep.FirstErr
	return s, first + rep.Issued/int64(len(fs)) - 1, time.Duration(rep.CPU), nil
}

// runSubmitter starts this binary as the submitting child, hands it spec and waits for its report.
func runSubmitter(ctx context.Context, spec submitSpec) (submitReport, error) {
	var rep submitReport
	exe, err := os.Executable()
	if err != nil {
		return rep, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return rep, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), submitterRole+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// The child dies with the benchmark, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return rep, fmt.Errorf("submitting process (%s): %w: %s", filepath.Base(exe), err, truncate(errOut.String(), 500))
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("submitting process's report: %w: %s", err, truncate(out.String(), 200))
	}
	return rep, nil
}

// submitterMain is the submitting child: spec from stdin, report to stdout.
func submitterMain(stdin io.Reader, stdout io.Writer) error {
	var spec submitSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if len(spec.Boards) == 0 || len(spec.Servers) == 0 || spec.Rate <= 0 {
		return fmt.Errorf("spec needs boards, servers and a rate: %+v", spec)
	}
	rt, err := mapRespTimes(spec.RespFile, spec.Slots)
	if err != nil {
		return err
	}
	if len(rt.mem) < len(spec.Boards)*spec.Slots*8 || spec.Last >= int64(spec.Slots) {
		return fmt.Errorf("%s holds %d bytes: too small for %d boards of %d slots up to submission %d",
			spec.RespFile, len(rt.mem), len(spec.Boards), spec.Slots, spec.Last)
	}
	clients := make([]*rawHTTP, len(spec.Servers))
	for i, addr := range spec.Servers {
		clients[i] = newRawHTTP(addr, "/graphql")
	}
	resp := make([][]atomic.Int64, len(spec.Boards))
	for b := range resp {
		resp[b] = rt.board(b)
	}
	return json.NewEncoder(stdout).Encode(submitAll(context.Background(), spec, clients, resp))
}

// submitAll runs submitLoop and reports it, with this process's CPU time.
func submitAll(ctx context.Context, spec submitSpec, clients []*rawHTTP, resp [][]atomic.Int64) submitReport {
	var rep submitReport
	t0 := time.Now()
	lat, errs, firstErr, issued := submitLoop(ctx, spec, clients, resp)
	rep.Elapsed = int64(time.Since(t0))
	rep.Latencies = make([]int64, len(lat))
	for i, d := range lat {
		rep.Latencies[i] = int64(d)
	}
	rep.Errors, rep.FirstErr, rep.Issued = errs, firstErr, issued
	rep.CPU = int64(selfUsage().CPU)
	return rep
}

// submitLoop is the submitting itself: fanoutSubmitter clients, open loop (a pacer hands out due submissions;
// when every client is busy the pacer falls behind and the achieved rate shows it). Submission k of a board gives
// player f<k % fanoutPlayers> the score fanoutBase+k; its response time goes to resp[board][k].
func submitLoop(ctx context.Context, spec submitSpec, clients []*rawHTTP, resp [][]atomic.Int64) (
	lat []time.Duration, errs int64, firstErr string, issued int64) {
	type job struct {
		b, k int64
		h    *rawHTTP
	}
	nb := int64(len(spec.Boards))
	if err := warmClients(ctx, clients, fanoutSubmitter); err != nil {
		return nil, 1, err.Error(), 0
	}
	due := make(chan job, 1024)
	var handed atomic.Int64
	pctx, cancel := context.WithTimeout(ctx, time.Duration(spec.Budget))
	defer cancel()
	total := (spec.Last - spec.First + 1) * nb
	go func() {
		defer close(due)
		start := time.Now()
		for j := int64(0); j < total; j++ {
			at := start.Add(time.Duration(float64(j) / float64(spec.Rate) * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-pctx.Done():
					return
				}
			}
			select {
			case due <- job{j % nb, spec.First + j/nb, clients[j%int64(len(clients))]}:
				handed.Store(j + 1)
			case <-pctx.Done():
				return
			}
		}
	}()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for w := range fanoutSubmitter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range due {
				player := "f" + strconv.FormatInt(jb.k%fanoutPlayers, 10)
				body := request(submitMutation, append(scoreInput([]byte(`{"in":`), spec.Boards[jb.b], player,
					float64(fanoutBase+jb.k)), '}'))
				s := time.Now()
				_, err := jb.h.post(ctx, w, submitKey, body)
				end := time.Now()
				if err == nil {
					resp[jb.b][jb.k].Store(end.UnixNano())
				}
				mu.Lock()
				lat = append(lat, end.Sub(s))
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, errs, firstErr, handed.Load()
}

// warmClients opens the connection of each of workers workers to each client's server before the pacer starts, as
// a game server holds its connections: dialed on first use instead, hundreds of submitters opened theirs in the
// phase's first moments, and their handshakes (on a server busy with 10,000 websockets) were measured as
// submissions.
func warmClients(ctx context.Context, clients []*rawHTTP, workers int) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	for _, h := range clients {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.conn(ctx, w); err != nil {
					mu.Lock()
					fail = cmp.Or(fail, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return fail
}
