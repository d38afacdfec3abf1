package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/childproc"
	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/ledger"
)

// kill -9 PostgreSQL and the server process mid-bulk: clients send submitScores with eventIds to a server child
// process without pause; PostgreSQL is killed, then the server (and in a second round the server first, then
// PostgreSQL, so that events the ledger committed were not applied yet); both are started again. Against a model
// of what every client sent and what was acknowledged: every acknowledged item is in the ledger as sent and counts
// exactly once in the board's totals in Redis; the ledger holds nothing nobody sent; Redis holds nothing the
// ledger lacks (the board rebuilt from the ledger into a fresh Redis equals it, every field of every entry). At
// the end every item whose outcome the clients did not learn is sent again with its eventId: it is reconciled,
// never applied twice (every total is then the sum of every item, once).
func TestLedgerCrashMidBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	t.Parallel()
	built := make(chan string, 1)
	go func() { built <- buildServer(t) }() // while the servers start
	// fsync=off: a committed row survives a kill -9 of PostgreSQL all the same (the kernel has it), and the
	// restart skips crash recovery's fsyncs; the machine does not crash here.
	pg := pgtest.Start(t, "fsync=off")
	dbURL := pg.Database(t)
	rs := redistest.Standalone(t)
	prefix := redistest.Prefix(t)
	l, err := ledger.Open(ctxT(t, 30*time.Second), ledger.Config{URL: dbURL}) // the tables exist before the child
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	redisNow := leaderboard.New(rs.Client(t), leaderboard.Config{Prefix: prefix, PublishCommand: leaderboard.PublishNone})
	fresh := redistest.Standalone(t)
	rebuilt := leaderboard.New(fresh.Client(t), leaderboard.Config{Prefix: prefix, Ledger: l,
		PublishCommand: leaderboard.PublishNone})
	bin := <-built
	if bin == "" {
		t.FailNow()
	}
	child := &serverChild{t: t, bin: bin, dir: t.TempDir(), env: []string{
		"REDIS_URL=redis://" + rs.Addr, "KEY_PREFIX=" + prefix, "DATABASE_URL=" + dbURL,
		"API_KEYS=admin:" + testAdminKey + ",submit:" + testSubmitKey, "LOG_LEVEL=warn",
		"LEDGER_CHECK_INTERVAL=1s", "REQUEST_TIMEOUT=10s"}}
	child.start()
	const board = "bulk"
	m := &bulkModel{url: child.url(), items: map[string]*bulkItem{},
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}}
	t.Cleanup(m.client.CloseIdleConnections)
	var created struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := m.post(testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": board, "mode": "SUM"}},
		&created); err != nil || len(created.Errors) > 0 {
		t.Fatalf("createLeaderboard: %v %+v", err, created.Errors)
	}

	rdb := rs.Client(t)
	for round, pgFirst := range []bool{true, false} {
		m.bulk(t, board, round, func() {
			if pgFirst {
				pg.Kill()
				m.waitFailures(t, 1) // the clients met the ledger's absence
				child.kill()
			} else {
				// Redis takes no writes for a moment: commits go on, applies wait; once the ledger holds events
				// Redis has not applied (nor the clients heard of), the server dies, then PostgreSQL.
				if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "10000", "WRITE").Err(); err != nil {
					t.Error(err)
				}
				waitCommittedNotApplied(t, l, rdb, prefix, board)
				child.kill()
				if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
					t.Error(err)
				}
				pg.Kill()
			}
		})
		if err := pg.Start(); err != nil {
			t.Fatal(err)
		}
		l.Pool().Reset() // the test's own connections died with the server they were connected to
		child.start()
		m.check(t, board, l, redisNow, rebuilt, fmt.Sprintf("round %d", round))
	}
	// Every item whose outcome was not learned, sent again with its eventId.
	m.retryUnknown(t, board)
	m.check(t, board, l, redisNow, rebuilt, "after the retries")
	if n := m.count(func(it *bulkItem) bool { return !it.acked }); n > 0 {
		t.Fatalf("%d items still unacknowledged", n)
	}
}

// buildServer builds the server binary (package main) into a temporary directory of t's; "" when it failed (the
// test is marked failed). It builds as the Dockerfile does (CGO_ENABLED=0, -trimpath), as lbbench does: the
// suite's builds of the server share their compiled packages.
func buildServer(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "leaderboard")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/leaderboard/leaderboard")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go build: %v\n%s", err, out)
		return ""
	}
	return bin
}

// waitCommittedNotApplied waits (at most 10 s) until the ledger's head of board is ahead of the high-water mark
// Redis keeps for it (c.lsq, see the gate in leaderboard/common.lua): events recorded and not applied.
func waitCommittedNotApplied(t *testing.T, l *ledger.Ledger, rdb redis.UniversalClient, prefix, board string) {
	t.Helper()
	key := leaderboard.CountersKey(prefix, board)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		lb, _, err := l.Board(context.Background(), board)
		if err != nil {
			t.Fatal(err)
		}
		hwm, err := rdb.HGet(context.Background(), key, "lsq").Int64()
		if err != nil {
			t.Fatalf("HGET %s lsq: %v", key, err)
		}
		if lb.Head > hwm {
			t.Logf("the ledger's head %d, Redis's high-water mark %d", lb.Head, hwm)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger's head stayed at Redis's high-water mark %d for 10 s", hwm)
		}
	}
}

// serverChild is the server binary as a child process on a fixed loopback port (the same across restarts).
type serverChild struct {
	t    *testing.T
	bin  string
	dir  string
	env  []string
	addr string

	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

func (c *serverChild) url() string { return "http://" + c.addr }

// start starts the server and waits until /readyz answers 200 (at most 30 s).
func (c *serverChild) start() {
	t := c.t
	t.Helper()
	if c.addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.addr = ln.Addr().String()
		ln.Close()
		t.Cleanup(c.kill)
	}
	c.starts++
	logPath := filepath.Join(c.dir, fmt.Sprintf("server-%d.log", c.starts))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(c.bin)
	cmd.Env = append(append(os.Environ(), c.env...), "LISTEN_ADDR="+c.addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.cmd, c.exited = cmd, exited
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("the server exited at start:\n%s", log)
		default:
		}
		if resp, err := hc.Get(c.url() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("the server was not ready within 30 s:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server and waits until it is gone.
func (c *serverChild) kill() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
}

// bulkItem is one item a client sent, as it sent it.
type bulkItem struct {
	eventID, player string
	delta           float64
	name            string // "": none
	acked           bool   // a response said it was applied
}

func (it *bulkItem) input(board string) map[string]any {
	in := map[string]any{"board": board, "playerId": it.player, "score": it.delta, "eventId": it.eventID}
	if it.name != "" {
		in["displayName"] = it.name
		in["metadata"] = map[string]any{"by": it.eventID}
	}
	return in
}

// bulkModel is what the clients sent and what they were told.
type bulkModel struct {
	url    string
	client *http.Client

	mu       sync.Mutex
	items    map[string]*bulkItem // by eventId
	failures int                  // calls with an item not acknowledged
}

func (m *bulkModel) count(f func(*bulkItem) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, it := range m.items {
		if f(it) {
			n++
		}
	}
	return n
}

// post sends a GraphQL request and decodes the response into out.
func (m *bulkModel) post(key, query string, vars map[string]any, out any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, m.url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// send submits items in one submitScores call and records which were acknowledged: those with a result and
// no error. Anything else (an error, no response) leaves their outcome unknown.
func (m *bulkModel) send(board string, items []*bulkItem) (acked int) {
	in := make([]map[string]any, len(items))
	for i, it := range items {
		in[i] = it.input(board)
	}
	var out struct {
		Data struct {
			SubmitScores []*struct {
				Entry struct {
					PlayerID string `json:"playerId"`
				} `json:"entry"`
			} `json:"submitScores"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	err := m.post(testSubmitKey, submitsMutation, map[string]any{"in": in}, &out)
	failed := map[int]bool{}
	for _, e := range out.Errors {
		if len(e.Path) == 2 {
			if i, ok := e.Path[1].(float64); ok {
				failed[int(i)] = true
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, it := range items {
		if err == nil && len(out.Data.SubmitScores) == len(items) && out.Data.SubmitScores[i] != nil && !failed[i] &&
			out.Data.SubmitScores[i].Entry.PlayerID == it.player {
			it.acked = true
			acked++
		}
	}
	if acked < len(items) {
		m.failures++
	}
	return acked
}

// bulk runs 4 clients sending submitScores of 40 new items each without pause; once 20 calls were acknowledged
// it runs crash, then stops the clients.
func (m *bulkModel) bulk(t *testing.T, board string, round int, crash func()) {
	t.Helper()
	var ackedCalls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(round), uint64(c)))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				items := make([]*bulkItem, 40)
				m.mu.Lock()
				for k := range items {
					it := &bulkItem{eventID: fmt.Sprintf("r%d-c%d-%d-%d", round, c, n, k),
						player: "p" + strconv.Itoa(r.IntN(100)), delta: float64(r.IntN(19) - 9)}
					if r.IntN(4) == 0 {
						it.name = "N " + it.eventID
					}
					items[k] = it
					m.items[it.eventID] = it
				}
				m.mu.Unlock()
				if m.send(board, items) == len(items) {
					ackedCalls.Add(1)
				} else {
					time.Sleep(50 * time.Millisecond) // the server or the ledger is down: do not spin
				}
			}
		}()
	}
	for deadline := time.Now().Add(60 * time.Second); ackedCalls.Load() < 20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: %d calls acknowledged in 60 s", round, ackedCalls.Load())
		}
	}
	crash()
	close(stop)
	wg.Wait()
	t.Logf("round %d: %d items sent so far, %d acknowledged", round, m.count(func(*bulkItem) bool { return true }),
		m.count(func(it *bulkItem) bool { return it.acked }))
}

// waitFailures waits until at least n calls failed (at most 30 s).
func (m *bulkModel) waitFailures(t *testing.T, n int) {
	t.Helper()
	m.mu.Lock()
	want := m.failures + n
	m.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		got := m.failures
		m.mu.Unlock()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no call failed within 30 s")
		}
	}
}

// retryUnknown sends every item whose outcome is unknown again, with its eventId, until each is acknowledged
// (at most 30 s).
func (m *bulkModel) retryUnknown(t *testing.T, board string) {
	t.Helper()
	m.mu.Lock()
	var todo []*bulkItem
	for _, it := range m.items {
		if !it.acked {
			todo = append(todo, it)
		}
	}
	m.mu.Unlock()
	t.Logf("retrying %d items", len(todo))
	deadline := time.Now().Add(30 * time.Second)
	for len(todo) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d items not acknowledged within 30 s of retries", len(todo))
		}
		batch := todo[:min(100, len(todo))]
		if m.send(board, batch) < len(batch) {
			time.Sleep(50 * time.Millisecond)
		}
		var left []*bulkItem
		for _, it := range todo {
			if !it.acked {
				left = append(left, it)
			}
		}
		todo = left
	}
}

// check compares the model, the ledger and Redis after a restart (see TestLedgerCrashMidBulk).
func (m *bulkModel) check(t *testing.T, board string, l *ledger.Ledger, redisNow, rebuilt *leaderboard.Store,
	when string) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	// A probe acknowledged after the restart: the ledger's order applies every earlier event of the board to
	// Redis before it (the gate), so Redis is then caught up with the ledger up to the probe.
	probe := &bulkItem{eventID: "probe " + when, player: "probe", delta: 1}
	m.mu.Lock()
	m.items[probe.eventID] = probe
	m.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); m.send(board, []*bulkItem{probe}) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the probe was not acknowledged within 30 s", when)
		}
		time.Sleep(50 * time.Millisecond)
	}

	lb, ok, err := l.Board(ctx, board)
	if err != nil || !ok {
		t.Fatalf("%s: the ledger's board: %v %v", when, ok, err)
	}
	inLedger := map[string]leaderboard.LedgerEvent{}
	for after := int64(0); ; {
		evs, err := l.Events(ctx, lb.Key, after, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Kind == leaderboard.EventSubmit {
				if _, dup := inLedger[e.EventID]; dup {
					t.Errorf("%s: eventId %q recorded twice", when, e.EventID)
				}
				inLedger[e.EventID] = e
			}
		}
		after = evs[len(evs)-1].Seq
	}
	m.mu.Lock()
	want := map[string]float64{} // every player's total: the deltas the ledger holds, each once
	lost, acked := 0, 0
	for id, it := range m.items {
		e, ok := inLedger[id]
		if it.acked {
			acked++
			if !ok {
				lost++
				if lost <= 5 {
					t.Errorf("%s: acknowledged item %s is not in the ledger", when, id)
				}
			}
		}
		if ok {
			name := ""
			if e.Name != nil {
				name = *e.Name
			}
			if e.Player != it.player || e.Score != it.delta || name != it.name {
				t.Errorf("%s: %s in the ledger: %s %v %q, sent %s %v %q", when, id, e.Player, e.Score, name,
					it.player, it.delta, it.name)
			}
			want[it.player] += it.delta
		}
	}
	for id := range inLedger {
		if m.items[id] == nil {
			t.Errorf("%s: the ledger holds %q, which nobody sent", when, id)
		}
	}
	m.mu.Unlock()
	if lost > 0 {
		t.Fatalf("%s: %d of %d acknowledged items lost", when, lost, acked)
	}

	// Redis: every player's total is the ledger's, and nothing else is there.
	view := leaderboard.View{Board: board, Window: leaderboard.AllTime}
	page, err := redisNow.Top(ctx, view, 0, leaderboard.MaxFirst)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, e := range page.Entries {
		got[e.PlayerID] = e.Score
	}
	if len(got) != len(want) || int(page.Size) != len(want) {
		t.Errorf("%s: Redis has %d players (size %d), the ledger's events %d", when, len(got), page.Size, len(want))
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			t.Errorf("%s: %s's total in Redis is %v (there: %v), the ledger's events make %v", when, p, g, ok, w)
		}
	}
	// The board rebuilt from the ledger into a fresh Redis equals it, every field of every entry.
	if err := rebuilt.Rebuild(ctx, board); err != nil {
		t.Fatal(err)
	}
	if a, b := boardDump(t, redisNow, view), boardDump(t, rebuilt, view); a != b {
		t.Errorf("%s: Redis:\n%s\nrebuilt from the ledger:\n%s", when, a, b)
	}
	t.Logf("%s: %d items sent, %d acknowledged, %d in the ledger", when, len(m.items), acked, len(inLedger))
}
