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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

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
	// What drops a peer that never reads is the websocket ping: the server closes a connection that has not
	// answered a ping within 2 * WS_PING_INTERVAL (a peer that never reads never answers one; this one reads its
	// backlog at the end, so it is made not to answer them, see SetPingHandler below). The hub's own stuck-
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
	ws.SetPingHandler(func(string) error { return nil }) // stuck: no pong, even when it reads
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
