package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
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
	board window period version snapshot size removed entries { playerId rank score } } }`

const rankUpdatesSub = `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) { playerId rank score } }`

// liveList is a client-side list rebuilt from one topUpdates subscription with pubsub.Apply (the same rule the
// dashboard uses), with a check that versions have no gaps.
type liveList struct {
	first int
	mu    sync.Mutex
	list  []leaderboard.Entry
	ver   int
	snaps int
	err   error
}

type wireUpdate struct {
	Board    string   `json:"board"`
	Window   string   `json:"window"`
	Period   string   `json:"period"`
	Version  int      `json:"version"`
	Snapshot bool     `json:"snapshot"`
	Size     int      `json:"size"`
	Removed  []string `json:"removed"`
	Entries  []struct {
		PlayerID string  `json:"playerId"`
		Rank     int64   `json:"rank"`
		Score    float64 `json:"score"`
	} `json:"entries"`
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
	if err := json.Unmarshal(payload, &r); err != nil || len(r.Errors) > 0 {
		l.err = fmt.Errorf("bad update %s (%v)", payload, err)
		return
	}
	u := r.Data.TopUpdates
	if u.Version != l.ver+1 && l.err == nil {
		l.err = fmt.Errorf("version %d after %d", u.Version, l.ver)
	}
	if l.ver == 0 && !u.Snapshot && l.err == nil {
		l.err = fmt.Errorf("the first update is not a snapshot")
	}
	l.ver = u.Version
	if u.Snapshot {
		l.snaps++
	}
	es := make([]leaderboard.Entry, len(u.Entries))
	for i, e := range u.Entries {
		es[i] = leaderboard.Entry{PlayerID: e.PlayerID, Rank: e.Rank, Score: e.Score}
	}
	l.list = pubsub.Apply(l.list, u.Snapshot, es, u.Removed, l.first)
}

func (l *liveList) rows() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return liveRows(l.list)
}

func liveRows(es []leaderboard.Entry) string {
	out := ""
	for _, e := range es {
		out += fmt.Sprintf("%s:%d:%g ", e.PlayerID, e.Rank, e.Score)
	}
	return out
}

func entryRows(es []entry) string {
	out := ""
	for _, e := range es {
		out += fmt.Sprintf("%s:%d:%g ", e.PlayerID, e.Rank, e.Score)
	}
	return out
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

// waitLive waits until the rebuilt list equals what the `top` query returns.
func waitLive(t testing.TB, s *testServer, l *liveList, board string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		want := entryRows(s.top(t, board, l.first))
		got := l.rows()
		l.mu.Lock()
		err, ver := l.err, l.ver
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got == want && ver > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("board %s: rebuilt list (version %d) did not converge\n got  %s\n want %s", board, ver, got,
				want)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestLiveTopUpdatesWebsocket: graphql-transport-ws subscribers on boards of every mode; scores submitted
// concurrently (ties, SUM deltas, LATEST drops, bulk, removals, an exactTop board); every rebuilt list equals
// `top` at the end and versions have no gaps.
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
				s.submit(t, map[string]any{"board": b, "playerId": player, "score": score})
			}
		}()
	}
	wg.Wait()
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

// TestLiveSlowClient: a websocket client that subscribes and never reads does not delay the others, and the
// server's heap stays bounded while updates keep coming.
func TestLiveSlowClient(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "slowws"})
	// A raw client that subscribes 100 times to the top 100 and then never reads: the server's writes to it
	// fill the socket buffers and block.
	ws, _, err := websocket.DefaultDialer.Dial(s.WSURL, http.Header{"Sec-WebSocket-Protocol": {wstest.TransportWS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := ws.ReadMessage(); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("no ack: %s %v", ack, err)
	}
	for i := range 100 {
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
	for _, conn := range conns {
		select {
		case <-conn.Done():
			t.Fatal("a websocket closed during the Redis restart")
		default:
		}
	}
	for _, l := range lists {
		waitLive(t, s, l, "restart", 5*time.Second)
		l.mu.Lock()
		snaps := l.snaps
		l.mu.Unlock()
		if snaps < 2 {
			t.Fatalf("a subscriber got %d snapshots, want a fresh one after the restart", snaps)
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
