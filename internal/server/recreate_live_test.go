package server

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// wantDeletedEnd reads conn until each of ids has ended with one NOT_FOUND error and then completed (a data
// message with the error is followed by complete; an error message ends the operation by itself).
func wantDeletedEnd(t *testing.T, conn *wstest.Conn, within time.Duration, ids ...string) {
	t.Helper()
	ctx := ctxT(t, within)
	ended, errored := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		ended[id] = false
	}
	for left := len(ids); left > 0; {
		m, err := conn.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %v to end with NOT_FOUND: %v", ids, err)
		}
		done, ok := ended[m.ID]
		if !ok || done {
			continue // another subscription's data
		}
		if !errored[m.ID] {
			if m.IsData() && len(m.Errors()) == 0 {
				continue // an update sent before the deletion reached this server
			}
			if errs := m.Errors(); len(errs) != 1 || errs[0].Code() != string(leaderboard.NotFound) {
				t.Fatalf("%s: want a NOT_FOUND error, got %s: %s", m.ID, m.Type, m.Payload)
			}
			errored[m.ID] = true
			if m.Type == "error" {
				ended[m.ID], left = true, left-1
			}
			continue
		}
		if m.Type != "complete" {
			t.Fatalf("%s: want complete, got %s: %s", m.ID, m.Type, m.Payload)
		}
		ended[m.ID], left = true, left-1
	}
}

// A board deleted and created again through server a (3 -> 5 shards, then an unsharded board DESC -> ASC) while
// server b serves live subscriptions of it: b's topUpdates and rankUpdates subscriptions end with NOT_FOUND and
// complete, although the board exists again (the schema: "its live subscriptions end with NOT_FOUND, and the id
// may be created again, empty"); new subscriptions on b follow the new board, its new shards and its new order.
// Before, b's old subscriptions stayed on the old board object (3 shard channels, the old definition) unless b's
// hub happened to read the board between the deletion and the creation, and new subscriptions joined it: a list
// stuck without the players of shards 3 and 4.
func TestRecreatedBoardLiveOnOtherServer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.RedisURL = ""
	cfg.RedisClusterAddrs = redistest.SharedCluster(t).Addrs
	a, b := startServer(t, cfg), startServer(t, cfg)
	const rankSub = `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) { playerId rank score } }`
	const rankQuery = `query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { playerId rank score } }`
	for _, step := range []struct {
		id       string
		from, to map[string]any
		shards   int
	}{
		{"rs-shards", map[string]any{"shards": 3}, map[string]any{"shards": 5}, 5},
		{"rs-order", map[string]any{}, map[string]any{"order": "ASC"}, 1},
	} {
		from, to := map[string]any{"id": step.id}, map[string]any{"id": step.id}
		for k, v := range step.from {
			from[k] = v
		}
		for k, v := range step.to {
			to[k] = v
		}
		a.create(t, from)
		for i := range 9 {
			a.submit(t, map[string]any{"board": step.id, "playerId": fmt.Sprintf("p%d", i), "score": float64(i)})
		}
		conn := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
		ctx := ctxT(t, 30*time.Second)
		if err := conn.Subscribe("top", topUpdatesSub, map[string]any{"b": step.id, "n": 50}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "top", nil)
		if err := conn.Subscribe("rank", rankSub, map[string]any{"b": step.id, "p": "p4"}); err != nil {
			t.Fatal(err)
		}
		conn.NextData(t, ctx, "rank", nil)

		a.must(t, testAdminKey, deleteMutation, map[string]any{"id": step.id}, nil)
		a.create(t, to)
		wantDeletedEnd(t, conn, 15*time.Second, "top", "rank")

		// The new board, with players on every shard; new subscriptions on b follow it.
		shards := map[int]bool{}
		watched := ""
		for i := 0; i < 18 || len(shards) < step.shards; i++ {
			p := fmt.Sprintf("n%d", i)
			s := leaderboard.ShardOf(p, step.shards)
			shards[s] = true
			if watched == "" && (step.shards == 1 || s >= 3) {
				watched = p
			}
			a.submit(t, map[string]any{"board": step.id, "playerId": p, "score": float64(100 + i)})
		}
		l := &liveList{first: 50}
		if err := conn.Subscribe("top2", topUpdatesSub, map[string]any{"b": step.id, "n": 50}); err != nil {
			t.Fatal(err)
		}
		if err := conn.Subscribe("rank2", rankSub, map[string]any{"b": step.id, "p": watched}); err != nil {
			t.Fatal(err)
		}
		ranks := make(chan json.RawMessage, 64)
		go func() {
			for {
				m, err := conn.Next(t.Context())
				if err != nil {
					close(ranks)
					return
				}
				switch {
				case m.ID == "top2" && m.IsData():
					l.apply(m.Payload)
				case m.ID == "rank2" && m.IsData():
					ranks <- m.Payload
				case m.Type == "error":
					t.Errorf("subscription %s failed: %s", m.ID, m.Payload)
				}
			}
		}()
		waitLive(t, a, l, step.id, 10*time.Second)
		// Later writes on every shard, and one that moves the watched player to the top.
		for s := range step.shards {
			for i := 0; ; i++ {
				p := fmt.Sprintf("late%d-%d", s, i)
				if leaderboard.ShardOf(p, step.shards) == s {
					a.submit(t, map[string]any{"board": step.id, "playerId": p, "score": float64(1000 + s)})
					break
				}
			}
		}
		best := 5000.0
		if step.to["order"] == "ASC" {
			best = -5000
		}
		a.submit(t, map[string]any{"board": step.id, "playerId": watched, "score": best})
		waitLive(t, a, l, step.id, 10*time.Second)
		var want json.RawMessage
		{
			r := a.do(t, "", rankQuery, map[string]any{"b": step.id, "p": watched})
			if len(r.Errors) > 0 {
				t.Fatalf("rank query: %+v", r.Errors)
			}
			want = r.Data
		}
		deadline := time.After(10 * time.Second)
		for got := ""; ; {
			select {
			case p, ok := <-ranks:
				if !ok {
					t.Fatal("connection ended")
				}
				var m struct {
					Data struct {
						RankUpdates json.RawMessage `json:"rankUpdates"`
					} `json:"data"`
				}
				if err := json.Unmarshal(p, &m); err != nil {
					t.Fatal(err)
				}
				got = string(m.Data.RankUpdates)
			case <-deadline:
				t.Fatalf("%s: rankUpdates of %s: last %s, want %s", step.id, watched, got, want)
			}
			var q struct {
				Rank json.RawMessage `json:"rank"`
			}
			if err := json.Unmarshal(want, &q); err != nil {
				t.Fatal(err)
			}
			if got == string(q.Rank) {
				break
			}
		}
		conn.Close()
		<-conn.Done()
	}
}
