package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/childproc"
	"github.com/leaderboard/leaderboard/internal/gqlstream"
	"github.com/leaderboard/leaderboard/internal/redistest"
)

// Event streams whose clients stop reading: an answer larger than what the kernel buffers for the socket blocks
// the server's write of it. A loopback socket whose peer reads nothing took 2.8 MB here (the send buffer grows to
// that by itself): five aliased top(first: 1000) lists of 1 KiB rows (bigQuery) exceed it. Tests that need many
// such streams give the server's sockets small send buffers instead (tinySendBuffers), and 400 KB do (smallQuery).

const (
	bigQuery = `{ a: top(board: "big", first: 1000) { playerId metadata }
	b: top(board: "big", first: 1000) { playerId metadata } c: top(board: "big", first: 1000) { playerId metadata }
	d: top(board: "big", first: 1000) { playerId metadata } e: top(board: "big", first: 1000) { playerId metadata } }`
	smallQuery = `{ top(board: "big", first: 100) { playerId metadata } }`
)

// bigBoard makes board "big" of players players, each with 1 KiB of metadata, through the API at s.URL.
func bigBoard(t testing.TB, s *testServer, players int) {
	t.Helper()
	s.create(t, map[string]any{"id": "big"})
	pad := strings.Repeat("x", 1000)
	for start := 0; start < players; start += 250 {
		inputs := make([]map[string]any, 0, 250)
		for n := start; n < min(start+250, players); n++ {
			inputs = append(inputs, map[string]any{"board": "big", "playerId": fmt.Sprintf("p%04d", n), "score": n,
				"metadata": map[string]any{"pad": pad}})
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": inputs}, nil)
	}
}

// tinySendBuffers gives the sockets a listener accepts a send buffer of 8 KiB (the kernel doubles it), which it
// no longer grows: an answer of 100 KB then blocks a write to a peer that does not read.
func tinySendBuffers(ln net.Listener) net.Listener { return tinyBufListener{ln} }

type tinyBufListener struct{ net.Listener }

func (l tinyBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// stuckStream opens an event stream of query over GET on a raw connection that never reads (with a small receive
// buffer, as a client that has stopped reading has a full one).
func stuckStream(t testing.TB, addr, query string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /graphql?%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
		url.Values{"query": {query}}.Encode(), addr)
	return conn
}

// tcpQueue sums what the kernel holds unsent (the send queue, /proc/net/tcp's tx_queue) on the server's sockets
// (local port port) connected to the clients conns, counts them (TIME_WAIT aside: it holds no data), and names the
// clients (their ports) whose sockets hold 4 KiB or more unsent (full: the client does not read). The kernel's own
// view of the server's connections.
func tcpQueue(t testing.TB, port int, conns []net.Conn) (sockets int, full map[int64]bool, unsent int64) {
	t.Helper()
	peers, full := map[int64]bool{}, map[int64]bool{}
	for _, c := range conns {
		peers[int64(c.LocalAddr().(*net.TCPAddr).Port)] = true
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 5 || fields[3] == "06" { // 06: TIME_WAIT
				continue
			}
			_, lport, _ := strings.Cut(fields[1], ":")
			_, rport, _ := strings.Cut(fields[2], ":")
			lp, _ := strconv.ParseInt(lport, 16, 32)
			rp, _ := strconv.ParseInt(rport, 16, 32)
			if int(lp) != port || !peers[rp] {
				continue
			}
			tx, _, _ := strings.Cut(fields[4], ":")
			q, _ := strconv.ParseInt(tx, 16, 64)
			sockets++
			unsent += q
			if q >= 4<<10 {
				full[rp] = true
			}
		}
	}
	return sockets, full, unsent
}

func portOf(t testing.TB, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSSEChildServer is the server process of TestSSEStuckStreamThatLeaves: a test server configured from the
// environment, with small socket send buffers, that serves until its standard input closes.
func TestSSEChildServer(t *testing.T) {
	if os.Getenv("LB_SSE_CHILD") != "1" {
		t.Skip("the server process of TestSSEStuckStreamThatLeaves")
	}
	cfg, err := LoadConfig(nil, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	s := startServerWrapped(t, cfg, testLogger(t), tinySendBuffers)
	fmt.Printf("listening %s\n", s.URL)
	io.Copy(io.Discard, os.Stdin)
}

// Issue 43: an event stream whose client stops reading a large answer and leaves after a WS_PING_INTERVAL (no key,
// default settings but a short ping interval) must not take the server down. gqlgen's transport.SSE (v0.17.98)
// flushed a keep-alive after its handler had returned: a nil-pointer panic in a goroutine of its own, and the
// process was gone. The server runs in a child process (this test binary, TestSSEChildServer) so that a crash
// fails this test instead of ending the test run.
func TestSSEStuckStreamThatLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	t.Parallel()
	const ping = 50 * time.Millisecond
	child := exec.Command(os.Args[0], "-test.run=^TestSSEChildServer$", "-test.count=1", "-test.timeout=2m")
	child.Env = append(os.Environ(), "LB_SSE_CHILD=1", "LISTEN_ADDR=127.0.0.1:0",
		"REDIS_URL=redis://"+redistest.SharedStandalone(t).Addr, "KEY_PREFIX="+redistest.Prefix(t),
		"API_KEYS=admin:"+testAdminKey+",submit:"+testSubmitKey, "WS_PING_INTERVAL="+ping.String(), "LOG_LEVEL=error")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	child.Stderr = &stderr
	if err := childproc.Start(child); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var out syncBuffer
	var once sync.Once
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				once.Do(func() { addr <- u })
			}
			fmt.Fprintln(&out, sc.Text())
		}
		child.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			child.Process.Kill()
			<-exited
		}
	})
	var s *testServer
	select {
	case u := <-addr:
		s = &testServer{URL: u}
	case <-exited:
		t.Fatalf("the server process ended: %s\n%s", out.String(), stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the server process did not start within 60s")
	}
	bigBoard(t, s, 200)
	port := portOf(t, s.URL)

	// Eight streams that read nothing: each one's answer fills the socket's buffers and its write blocks.
	var conns []net.Conn
	for range 8 {
		conns = append(conns, stuckStream(t, strings.TrimPrefix(s.URL, "http://"), smallQuery))
	}
	waitUntil(t, 60*time.Second, "the answers filling the sockets", func() bool {
		_, full, _ := tcpQueue(t, port, conns)
		return len(full) == len(conns)
	})
	time.Sleep(2 * ping) // the scenario of the issue: the client leaves after a ping interval or so
	for _, c := range conns {
		c.Close()
	}
	// The server lets go of the streams (the kernel's view: no socket of the port left), and lives on for a
	// hundred ping intervals after that (the crash came within a few).
	alive := func(what string) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("the server process ended %s:\n%s", what, stderr.String())
		default:
		}
	}
	waitUntil(t, 30*time.Second, "the streams' sockets closed", func() bool {
		alive("while its streams ended")
		n, _, _ := tcpQueue(t, port, conns)
		return n == 0
	})
	for range 100 {
		time.Sleep(ping)
		alive("after its streams ended")
	}
	if code := getStatus(t, s.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	alive("after /healthz")
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("the server process panicked:\n%s", stderr.String())
	}
}

// goroutinesIn counts the goroutines whose stacks mention fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// setStreamWriteTimeout sets the write timeout of the streams and websockets that s accepts from now on, and
// returns the one it had.
func setStreamWriteTimeout(s *testServer, d time.Duration) (old time.Duration) {
	s.App.streams.Tune(func(set *gqlstream.Settings) { old, set.WriteTimeout = set.WriteTimeout, d })
	return old
}

// streamsOpen is how many event streams s has registered (for CloseAll), and the addresses holding a share of
// MAX_CONNS_PER_ADDR.
func streamsOpen(s *testServer) (streams, addrs int) {
	st := s.App.streams.Stats()
	return st.Streams, st.Addrs
}

// Issue 43: event streams left open and never read. Each stays until one write has waited the write timeout (10 s,
// 2 s here), then is closed, and its connection reset: the kernel holds nothing more for it (its send queue, /proc/net/tcp), its
// goroutines end, its share of MAX_CONNS_PER_ADDR comes back, and the Go heap is back where it was; while they
// are stuck, each holds at most about two answers of Go memory. gqlgen's transport kept every one of them (and
// the few MB of its send queue) until its client left. Not parallel: it counts the process's goroutines.
func TestSSEStuckStreamsReleased(t *testing.T) {
	const streams = 30
	s := startServerWrapped(t, testConfig(t), testLogger(t), tinySendBuffers)
	timeout := 2 * time.Second
	if d := setStreamWriteTimeout(s, timeout); d != 10*time.Second {
		t.Errorf("the write timeout of streams is %v, the README says 10 s", d) // "disconnected 10 s after a write to it blocks"
	}
	bigBoard(t, s, 200)
	port := portOf(t, s.URL)
	answer := len(s.do(t, "", smallQuery, nil).Data) // about 100 KB
	time.Sleep(300 * time.Millisecond)               // the test client's connection goroutines settle
	base := runtime.NumGoroutine()
	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	heapBase := heap()

	start := time.Now()
	var conns []net.Conn
	for range streams {
		conns = append(conns, stuckStream(t, strings.TrimPrefix(s.URL, "http://"), smallQuery))
	}
	// Every stream gets stuck (its socket full) and is then released. The heap is measured once every stream has
	// been stuck, so that no operation is still being executed (30 executions at once hold about 1 MB each, and
	// that is not what the streams keep), and again at each new most stuck at once.
	everFull, mostFull := map[int64]bool{}, 0
	waitUntil(t, 30*time.Second, "the streams released", func() bool {
		n, full, unsent := tcpQueue(t, port, conns)
		allStuck := len(everFull) < streams
		for p := range full {
			everFull[p] = true
		}
		allStuck = allStuck && len(everFull) == streams
		if len(everFull) == streams && (allStuck || len(full) > mostFull) {
			mostFull = max(mostFull, len(full))
			if h := heap(); h > heapBase+uint64(len(full)*2*answer)+8<<20 {
				t.Errorf("%d stuck streams of %d-byte answers hold %d KB of heap", len(full), answer, (h-heapBase)>>10)
			} else if len(full) == streams {
				t.Logf("%d streams stuck after %v: %d KB unsent in the kernel, %d KB more heap", streams,
					time.Since(start).Round(time.Millisecond), unsent>>10, (h-heapBase)>>10)
			}
		}
		open, addrs := streamsOpen(s)
		return n == 0 && open == 0 && addrs == 0
	})
	t.Logf("released %v after they were opened (write timeout %v; at most %d stuck at once)",
		time.Since(start).Round(time.Millisecond), timeout, mostFull)
	if len(everFull) != streams {
		t.Errorf("%d of the %d streams got stuck: the test tested the others only", len(everFull), streams)
	}
	waitUntil(t, 10*time.Second, "the streams' goroutines ended", func() bool {
		return goroutinesIn("gqlstream.(*sseStream)") == 0 && runtime.NumGoroutine() <= base+2
	})
	if h := heap(); h > heapBase+8<<20 {
		t.Errorf("heap %d KB after the streams were released, %d KB before", h>>10, heapBase>>10)
	}
	// The server goes on serving.
	if r := s.do(t, "", `{ top(board: "big", first: 1) { playerId } }`, nil); len(r.Errors) > 0 {
		t.Errorf("after the stuck streams: %+v", r.Errors)
	}
}

// Issue 43: SIGTERM with an event stream whose client does not read ends at once, not after SHUTDOWN_TIMEOUT nor
// the write timeout: the stream's write under way gets gqlstream.CloseLinger (1 s), and the stream ends. Not parallel: it
// counts the process's goroutines.
func TestSSEShutdownWithStuckStream(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 12 * time.Second // the default write timeout (10 s) is shorter: neither may be waited for
	s := startServerWrapped(t, cfg, testLogger(t), tinySendBuffers)
	bigBoard(t, s, 200)
	port := portOf(t, s.URL)
	time.Sleep(300 * time.Millisecond) // the test client's connection goroutines settle
	base := runtime.NumGoroutine()
	conns := []net.Conn{stuckStream(t, strings.TrimPrefix(s.URL, "http://"), smallQuery)}
	waitUntil(t, 30*time.Second, "the stream stuck", func() bool {
		_, full, _ := tcpQueue(t, port, conns)
		return len(full) == 1
	})
	start := time.Now()
	s.Shutdown(t)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v with a stuck event stream (SHUTDOWN_TIMEOUT %v)", d, cfg.ShutdownTimeout)
	} else {
		t.Logf("shutdown took %v with a stuck event stream", d.Round(time.Millisecond))
	}
	if n, _, _ := tcpQueue(t, port, conns); n != 0 {
		t.Errorf("%d sockets of the server left after shutdown", n)
	}
	waitUntil(t, 10*time.Second, "the stream's goroutines ended", func() bool {
		return goroutinesIn("gqlstream.(*sseStream)") == 0 && runtime.NumGoroutine() <= base+2
	})
}
