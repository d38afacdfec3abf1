package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

const topUpdatesSub = `subscription($b: ID!, $n: Int) { topUpdates(board: $b, first: $n) {
	board window period version snapshot size removed entries { ` + entryFields + ` } } }`

const rankUpdatesSub = `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) { playerId rank score } }`

// liveList is a client-side list rebuilt from one topUpdates subscription with pubsub.Apply (the same rule the
// dashboard uses), with the latest size, and a check that versions have no gaps.
type liveList struct {
	first int
	mu    sync.Mutex
	list  []leaderboard.Entry
	size  int64
	// board, window and period of the updates (all updates of a subscription must agree)
	board, window, period string
	ver                   int
	snaps                 int
	err                   error
}

type wireUpdate struct {
	Board    string   `json:"board"`
	Window   string   `json:"window"`
	Period   string   `json:"period"`
	Version  int      `json:"version"`
	Snapshot bool     `json:"snapshot"`
	Size     int64    `json:"size"`
	Removed  []string `json:"removed"`
	Entries  []entry  `json:"entries"`
}

func (l *liveList) apply(payload json.RawMessage) {
	var r struct {
		Data struct {
			TopUpdates wireUpdate `json:"topUpdates"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fail := func(format string, args ...any) {
		if l.err == nil {
			l.err = fmt.Errorf(format, args...)
		}
	}
	if err := json.Unmarshal(payload, &r); err != nil || len(r.Errors) > 0 {
		fail("bad update %s (%v)", payload, err)
		return
	}
	u := r.Data.TopUpdates
	if u.Version != l.ver+1 {
		fail("version %d after %d", u.Version, l.ver)
	}
	if l.ver == 0 && !u.Snapshot {
		fail("the first update is not a snapshot")
	}
	if l.ver > 0 && (u.Board != l.board || u.Window != l.window || u.Period != l.period) {
		fail("update for %s/%s/%s after %s/%s/%s", u.Board, u.Window, u.Period, l.board, l.window, l.period)
	}
	l.board, l.window, l.period = u.Board, u.Window, u.Period
	l.ver = u.Version
	l.size = u.Size
	if u.Snapshot {
		l.snaps++
	}
	es := make([]leaderboard.Entry, len(u.Entries))
	for i, e := range u.Entries {
		// A row that is sent was read with the size it comes with.
		if want := topPercent(int64(e.Rank), u.Size); e.TopPercent != want {
			fail("version %d: %s has topPercent %v, want 100 * rank %d / size %d = %v", u.Version, e.PlayerID,
				e.TopPercent, e.Rank, u.Size, want)
		}
		es[i] = leaderboard.Entry{PlayerID: e.PlayerID, DisplayName: e.DisplayName, Rank: int64(e.Rank),
			Approximate: e.Approximate, Score: e.Score, TopPercent: e.TopPercent, UpdatedAt: e.UpdatedAt,
			Metadata: e.Metadata}
	}
	l.list = pubsub.Apply(l.list, u.Snapshot, es, u.Removed, l.first)
}

// topPercent is 100 * rank / size, as the store computes it (0 for an empty ranking).
func topPercent(rank, size int64) float64 {
	if size <= 0 {
		return 0
	}
	return 100 * float64(rank) / float64(size)
}

// rows renders the rebuilt list the way liveRows does, with the topPercent a client derives from each row's rank
// and the latest size (rows that did not move are not resent when only the size changed).
func (l *liveList) rows() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return liveRows(l.board, l.window, l.period, l.size, l.list, func(e leaderboard.Entry) float64 {
		return topPercent(e.Rank, l.size)
	})
}

// liveRows renders every field a subscriber sees: the view, the size and, per row, the id, display name, rank,
// approximate, score, updatedAt, metadata (canonical JSON) and the topPercent pct gives.
func liveRows(board, window, period string, size int64, es []leaderboard.Entry,
	pct func(leaderboard.Entry) float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s/%s size=%d:", board, window, period, size)
	for _, e := range es {
		name := "<none>"
		if e.DisplayName != nil {
			name = strconv.Quote(*e.DisplayName)
		}
		fmt.Fprintf(&b, "\n  %s name=%s rank=%d approx=%v score=%v at=%s meta=%s pct=%v", e.PlayerID, name, e.Rank,
			e.Approximate, e.Score, e.UpdatedAt.UTC().Format(time.RFC3339Nano), canonicalJSON(e.Metadata), pct(e))
	}
	return b.String()
}

// canonicalJSON re-encodes a JSON value with sorted keys; absent and null are "null".
func canonicalJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid:" + string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// pump reads a connection and hands each data message to the list of its operation id.
func pump(t testing.TB, c *wstest.Conn, lists map[string]*liveList) {
	go func() {
		for {
			m, err := c.Next(context.Background())
			if err != nil {
				return
			}
			if l := lists[m.ID]; l != nil && m.IsData() {
				l.apply(m.Payload)
			} else if m.Type == "error" {
				t.Errorf("subscription %s failed: %s", m.ID, m.Payload)
			}
		}
	}()
}

// waitLive waits until the rebuilt list equals the top list that s.Store (the test's own Store over the server's
// Redis, not the server's hub or cache) reads: every field of every row, the size, and the topPercent a client
// derives, which must be the store's; the store's topPercent must itself be 100 * rank / size.
func waitLive(t testing.TB, s *testServer, l *liveList, board string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		want, readErr := "", error(nil)
		p, err := s.Store.Top(context.Background(), leaderboard.View{Board: board}, 0, l.first)
		if err != nil {
			readErr = err // Redis may be coming back (TestLiveRedisRestart)
		} else {
			for _, e := range p.Entries {
				if w := topPercent(e.Rank, p.Size); e.TopPercent != w {
					t.Fatalf("store entry %s: topPercent %v is not 100 * rank %d / size %d = %v", e.PlayerID,
						e.TopPercent, e.Rank, p.Size, w)
				}
			}
			want = liveRows(p.Board, string(p.Window), p.Period, p.Size, p.Entries,
				func(e leaderboard.Entry) float64 { return e.TopPercent })
		}
		got := l.rows()
		l.mu.Lock()
		lerr, ver := l.err, l.ver
		l.mu.Unlock()
		if lerr != nil {
			t.Fatal(lerr)
		}
		if readErr == nil && got == want && ver > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("board %s: rebuilt list (version %d) did not converge (store read error: %v)\n got  %s\n want %s",
				board, ver, readErr, got, want)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestLiveTopUpdatesWebsocket: graphql-transport-ws subscribers on boards of every mode; scores submitted
// concurrently (ties, SUM deltas, LATEST drops, bulk, removals, display names and metadata, an exactTop board);
// every rebuilt list equals the store's top list at the end, every field and the size included, and versions
// have no gaps.
func TestLiveTopUpdatesWebsocket(t *testing.T) {
	s := startServer(t, testConfig(t))
	boards := []map[string]any{
		{"id": "best", "mode": "BEST"},
		{"id": "sum", "mode": "SUM"},
		{"id": "latest", "mode": "LATEST", "order": "ASC"},
		{"id": "exact", "mode": "BEST", "exactTop": 15},
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	lists := map[string]*liveList{}
	var order []string
	for _, b := range boards {
		for _, n := range []int{3, 10, 50} {
			id := fmt.Sprintf("%s-%d", b["id"], n)
			lists[id] = &liveList{first: n}
			order = append(order, id)
		}
	}
	pump(t, conn, lists)
	for _, b := range boards {
		s.create(t, b)
		for _, n := range []int{3, 10, 50} {
			if err := conn.Subscribe(fmt.Sprintf("%s-%d", b["id"], n), topUpdatesSub,
				map[string]any{"b": b["id"], "n": n}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for i := range 60 {
				b := boards[r.IntN(len(boards))]["id"].(string)
				player := fmt.Sprintf("p%d", r.IntN(60))
				score := float64(r.IntN(20))
				switch {
				case b == "sum":
					score -= 8
				case i%20 == 7:
					s.must(t, testAdminKey, `mutation($b: ID!, $p: ID!) { removePlayer(board: $b, playerId: $p) }`,
						map[string]any{"b": b, "p": player}, nil)
					continue
				case i%20 == 13:
					var in []map[string]any
					for k := range 10 {
						in = append(in, map[string]any{"board": b, "playerId": fmt.Sprintf("p%d", r.IntN(60)),
							"score": float64(k)})
					}
					s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
						map[string]any{"in": in}, nil)
					continue
				}
				in := map[string]any{"board": b, "playerId": player, "score": score}
				// Names and metadata come and change (also alone: a worse score on BEST with a new name).
				if r.IntN(3) == 0 {
					in["displayName"] = fmt.Sprintf("Player %d", r.IntN(4))
				}
				if r.IntN(4) == 0 {
					in["metadata"] = map[string]any{"level": r.IntN(3), "tag": "<&>", "z": []any{1, "a"}}
				}
				s.submit(t, in)
			}
		}()
	}
	wg.Wait()
	for _, id := range order {
		l := lists[id]
		waitLive(t, s, l, id[:len(id)-len(fmt.Sprint(l.first))-1], 3*time.Second)
	}
	// Then, on every board, changes that move nobody: a new display name alone (rank 1) and new metadata alone
	// (rank 2); once they are seen, a newcomer at the bottom: only the size changes for the short lists, so
	// their clients must get the new size and derive topPercent from it.
	for _, b := range boards {
		id := b["id"].(string)
		p, err := s.Store.Top(context.Background(), leaderboard.View{Board: id}, 0, 2)
		if err != nil || len(p.Entries) < 2 {
			t.Fatalf("board %s: %v %+v", id, err, p)
		}
		same := func(e leaderboard.Entry) float64 { // a score that changes nothing
			if id == "sum" {
				return 0
			}
			return e.Score
		}
		s.submit(t, map[string]any{"board": id, "playerId": p.Entries[0].PlayerID, "score": same(p.Entries[0]),
			"displayName": "Renamed " + p.Entries[0].PlayerID})
		s.submit(t, map[string]any{"board": id, "playerId": p.Entries[1].PlayerID, "score": same(p.Entries[1]),
			"metadata": map[string]any{"final": id}})
	}
	for _, id := range order {
		l := lists[id]
		waitLive(t, s, l, id[:len(id)-len(fmt.Sprint(l.first))-1], 3*time.Second)
	}
	for _, b := range boards {
		last := -1000.0 // below everybody (DESC), or a total below everybody's (SUM)
		if b["order"] == "ASC" {
			last = 1000
		}
		s.submit(t, map[string]any{"board": b["id"], "playerId": "newcomer", "score": last})
	}
	for _, id := range order {
		l := lists[id]
		waitLive(t, s, l, id[:len(id)-len(fmt.Sprint(l.first))-1], 3*time.Second)
	}
}

// TestLiveLegacyProtocol: the legacy graphql-ws subprotocol carries topUpdates and rankUpdates too.
func TestLiveLegacyProtocol(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "legacy"})
	conn := wstest.Dial(t, s.WSURL, wstest.LegacyWS, nil)
	if err := conn.Subscribe("rank", rankUpdatesSub, map[string]any{"b": "legacy", "p": "me"}); err != nil {
		t.Fatal(err)
	}
	lists := map[string]*liveList{"top": {first: 10}}
	ranks := make(chan json.RawMessage, 100)
	go func() {
		for {
			m, err := conn.Next(context.Background())
			if err != nil {
				return
			}
			switch {
			case m.ID == "top" && m.IsData():
				lists["top"].apply(m.Payload)
			case m.ID == "rank" && m.IsData():
				ranks <- m.Payload
			case m.Type == "error":
				t.Errorf("%s: %s", m.ID, m.Payload)
			}
		}
	}()
	if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": "legacy", "n": 10}); err != nil {
		t.Fatal(err)
	}
	s.submit(t, map[string]any{"board": "legacy", "playerId": "me", "score": 5})
	for i := range 12 {
		s.submit(t, map[string]any{"board": "legacy", "playerId": fmt.Sprintf("o%d", i), "score": 10 + i})
	}
	waitLive(t, s, lists["top"], "legacy", 3*time.Second)
	deadline := time.After(3 * time.Second)
	for {
		select {
		case p := <-ranks:
			var r struct {
				Data struct{ RankUpdates entry } `json:"data"`
			}
			if err := json.Unmarshal(p, &r); err != nil {
				t.Fatal(err)
			}
			if r.Data.RankUpdates.Rank == 13 { // overtaken by all twelve others
				return
			}
		case <-deadline:
			t.Fatal("rankUpdates did not report rank 13")
		}
	}
}

// TestLiveTwoServers: a score submitted through one server reaches subscribers of another on the same Redis.
func TestLiveTwoServers(t *testing.T) {
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	a.create(t, map[string]any{"id": "both"})
	conn := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	lists := map[string]*liveList{"t": {first: 10}}
	pump(t, conn, lists)
	if err := conn.Subscribe("t", topUpdatesSub, map[string]any{"b": "both", "n": 10}); err != nil {
		t.Fatal(err)
	}
	for i := range 15 {
		a.submit(t, map[string]any{"board": "both", "playerId": fmt.Sprintf("p%d", i), "score": i})
	}
	waitLive(t, b, lists["t"], "both", 3*time.Second)
	if lists["t"].ver < 2 {
		t.Fatal("only the snapshot arrived")
	}
}

// TestLiveSlowClient: a websocket client that subscribes and never reads does not delay the others, the
// server's heap stays bounded while updates keep coming, and the server drops that client in bounded time.
func TestLiveSlowClient(t *testing.T) {
	cfg := testConfig(t)
	// What drops a peer that never reads is the graphql-transport-ws ping: the server closes a connection that
	// has not answered a ping within 2 * WS_PING_INTERVAL (gqlgen's PingPongInterval). The hub's own stuck-
	// subscriber timeout (pubsub Config.StuckAfter, 30 s) is not configurable through Config, and neither is the
	// websocket write timeout (wsWriteTimeout, 10 s), so a short ping interval is what keeps this test quick. It
	// is long enough for the stuck client to stay connected through the writes below.
	cfg.WSPingInterval = 1500 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "slowws"})
	// A raw client that subscribes 100 times to the top 100 and then never reads: the server's writes to it
	// fill the socket buffers and block.
	ws, _, err := websocket.DefaultDialer.Dial(s.WSURL, http.Header{"Sec-WebSocket-Protocol": {wstest.TransportWS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	connected := time.Now()
	if err := ws.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := ws.ReadMessage(); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("no ack: %s %v", ack, err)
	}
	const stuckSubs = 100
	for i := range stuckSubs {
		if err := ws.WriteJSON(map[string]any{"type": "subscribe", "id": fmt.Sprint(i), "payload": map[string]any{
			"query": topUpdatesSub, "variables": map[string]any{"b": "slowws", "n": 100}}}); err != nil {
			t.Fatal(err)
		}
	}
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	lists := map[string]*liveList{}
	for i := range 10 {
		lists[fmt.Sprint(i)] = &liveList{first: 100}
	}
	pump(t, conn, lists)
	for id := range lists {
		if err := conn.Subscribe(id, topUpdatesSub, map[string]any{"b": "slowws", "n": 100}); err != nil {
			t.Fatal(err)
		}
	}
	var ms runtime.MemStats
	start := time.Now()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for i := range 15 { // changes all over the top 100 for a while
		var in []map[string]any
		for k := range 20 {
			in = append(in, map[string]any{"board": "slowws", "score": i*20 + k,
				"playerId": fmt.Sprintf("player-with-a-long-id-%d", (i*20+k)*7%150)})
		}
		s.must(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
			map[string]any{"in": in}, nil)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes done after %v", time.Since(start))
	for _, l := range lists {
		waitLive(t, s, l, "slowws", 2*time.Second)
	}
	t.Logf("converged after %v", time.Since(start))
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(before)
	t.Logf("heap grew by %d KiB with one stuck client holding 100 subscriptions", grown>>10)
	if grown > 32<<20 {
		t.Fatalf("heap grew by %d MiB with one stuck client", grown>>20)
	}

	// The stuck client now reads what was buffered for it, and then must find its subscriptions ended (complete
	// or error for every one) or its connection closed by the server, well within the generous bound.
	bound := connected.Add(2*cfg.WSPingInterval + 10*time.Second)
	if err := ws.SetReadDeadline(bound); err != nil {
		t.Fatal(err)
	}
	data, ended := 0, map[string]bool{}
	for len(ended) < stuckSubs {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the stuck client was not dropped within %v of connecting (%d data messages, %d "+
					"subscriptions ended)", bound.Sub(connected), data, len(ended))
			}
			t.Logf("stuck client: connection ended after %v: %v", time.Since(connected), err)
			break
		}
		var m wstest.Message
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("stuck client: undecodable message %q", msg)
		}
		switch m.Type {
		case "next":
			data++
		case "complete", "error":
			ended[m.ID] = true
		}
	}
	if data == 0 {
		t.Fatal("the stuck client got no data at all: its subscriptions never started")
	}
	t.Logf("stuck client: %d data messages, %d subscriptions ended, dropped %v after connecting", data,
		len(ended), time.Since(connected))
	// The client that reads is still connected: only the stuck one was dropped.
	select {
	case <-conn.Done():
		t.Fatal("the reading client was dropped too")
	default:
	}
}

// TestLiveNoGoroutineLeak: subscribe/unsubscribe cycles over websockets leave the goroutine count at its
// baseline (server and client share this process).
func TestLiveNoGoroutineLeak(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "cycles"})
	s.submit(t, map[string]any{"board": "cycles", "playerId": "p", "score": 1})
	warm := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := warm.Subscribe("w", topUpdatesSub, map[string]any{"b": "cycles", "n": 10}); err != nil {
		t.Fatal(err)
	}
	warm.NextData(t, ctxT(t, 5*time.Second), "w", nil)
	warm.Close()
	<-warm.Done()
	// The baseline is taken once the server has seen the warm-up connection go (its gauge is back to 0), plus a
	// moment for that connection's goroutines to return: a baseline taken too early is too high and would hide
	// a leak.
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	base := runtime.NumGoroutine()

	const conns, perConn = 10, 100 // 1,000 subscribe/unsubscribe cycles
	start := time.Now()
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
			defer conn.Close()
			ctx := ctxT(t, 30*time.Second)
			for i := range perConn {
				id := fmt.Sprintf("%d-%d", c, i)
				q, vars := topUpdatesSub, map[string]any{"b": "cycles", "n": 1 + i%100}
				if i%4 == 0 {
					q, vars = rankUpdatesSub, map[string]any{"b": "cycles", "p": "p"}
				}
				if err := conn.Subscribe(id, q, vars); err != nil {
					t.Error(err)
					return
				}
				for { // skip the server's "complete" for the previous id
					m, err := conn.Next(ctx)
					if err != nil || m.ID == id && !m.IsData() {
						t.Errorf("subscription %s: %+v %v", id, m, err)
						return
					}
					if m.ID == id {
						break
					}
				}
				if err := conn.Stop(id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("cycles done after %v", time.Since(start))
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > base && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after %d cycles, baseline %d\n%s", n, conns*perConn, base,
			buf[:runtime.Stack(buf, true)])
	}
}

// waitMetric waits until a sample of /metrics has the value want.
func waitMetric(t testing.TB, s *testServer, sample string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.metric(t, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after %v, want %v", sample, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLiveRedisRestart: Redis restarted under 100 websocket subscriptions; they stay open, each gets a fresh
// snapshot after Redis is back, and all converge.
func TestLiveRedisRestart(t *testing.T) {
	srv := redistest.Standalone(t)
	cfg := testConfig(t)
	cfg.RedisURL = "redis://" + srv.Addr
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "restart"})
	for i := range 12 {
		s.submit(t, map[string]any{"board": "restart", "playerId": fmt.Sprintf("p%d", i), "score": i})
	}
	lists := map[string]*liveList{}
	var conns []*wstest.Conn
	for c := range 4 {
		conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		conns = append(conns, conn)
		mine := map[string]*liveList{}
		for i := range 25 {
			id := fmt.Sprintf("%d-%d", c, i)
			mine[id] = &liveList{first: 10}
			lists[id] = mine[id]
		}
		pump(t, conn, mine)
		for id := range mine {
			if err := conn.Subscribe(id, topUpdatesSub, map[string]any{"b": "restart", "n": 10}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range lists {
		waitLive(t, s, l, "restart", 3*time.Second)
	}
	srv.Stop()
	time.Sleep(200 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted Redis is empty: define the board again and write (retrying while the server reconnects).
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.do(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": "restart"}})
		if len(r.Errors) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not recover: %+v", r.Errors)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.submit(t, map[string]any{"board": "restart", "playerId": "after", "score": 3})
	for _, l := range lists {
		waitLive(t, s, l, "restart", 5*time.Second)
		l.mu.Lock()
		snaps := l.snaps
		l.mu.Unlock()
		if snaps < 2 {
			t.Fatalf("a subscriber got %d snapshots, want a fresh one after the restart", snaps)
		}
	}
	// Checked once every list has converged after the restart (Done stays closed once a connection ended), so
	// this covers the whole restart, not just the moment Redis came back.
	for _, conn := range conns {
		select {
		case <-conn.Done():
			t.Fatal("a websocket closed during the Redis restart")
		default:
		}
	}
}

// TestLiveSharedEncoding: subscribers of the same board with the same subscription share one rendering of each
// update (graph's shared path), and every one of them still rebuilds the exact list with gap-free versions.
func TestLiveSharedEncoding(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "shared"})
	const conns, perConn = 4, 15
	var all []*liveList
	for c := range conns {
		conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
		lists := map[string]*liveList{}
		for i := range perConn {
			l := &liveList{first: 10}
			lists[fmt.Sprint(i)] = l
			all = append(all, l)
		}
		pump(t, conn, lists)
		for i := range perConn {
			if err := conn.Subscribe(fmt.Sprint(i), topUpdatesSub, map[string]any{"b": "shared", "n": 10}); err != nil {
				t.Fatalf("connection %d: %v", c, err)
			}
		}
	}
	for _, l := range all { // every subscriber has its snapshot before the writes start
		waitLive(t, s, l, "shared", 3*time.Second)
	}
	before := graph.SharedRenders()
	for i := range 30 {
		s.submit(t, map[string]any{"board": "shared", "playerId": fmt.Sprintf("p%d", i%12), "score": float64(i)})
		time.Sleep(20 * time.Millisecond)
	}
	delivered := 0
	for _, l := range all {
		waitLive(t, s, l, "shared", 3*time.Second)
		l.mu.Lock()
		delivered += l.ver - 1
		l.mu.Unlock()
	}
	renders := graph.SharedRenders() - before
	t.Logf("%d updates delivered to %d subscribers from %d renderings", delivered, len(all), renders)
	if renders == 0 || renders*int64(len(all))/4 > int64(delivered) {
		t.Fatalf("%d renderings for %d delivered updates: updates are not shared", renders, delivered)
	}
}
