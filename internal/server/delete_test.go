package server

import (
	"runtime"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

const deleteMutation = `mutation($id: ID!) { deleteLeaderboard(id: $id) }`

// TestDeleteLeaderboardEndsSubscriptions: topUpdates (both websocket subprotocols), rankUpdates and periodClosed
// subscribers of a board get a NOT_FOUND error when it is deleted, then their subscription completes, while a
// subscription on another board goes on; the connection stays usable; no goroutine is left behind. Only the admin role may delete;
// after the call top and submitScore are NOT_FOUND, leaderboard is null and leaderboards no longer lists it;
// deleting again is false; created again, the board is empty.
func TestDeleteLeaderboardEndsSubscriptions(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "warm"})
	warm := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	if err := warm.Subscribe("w", topUpdatesSub, map[string]any{"b": "warm", "n": 3}); err != nil {
		t.Fatal(err)
	}
	warm.NextData(t, ctxT(t, 10*time.Second), "w", nil)
	warm.Close()
	<-warm.Done()
	waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // the warm-up connection's goroutines return
	base := runtime.NumGoroutine()

	s.create(t, map[string]any{"id": "doomed", "windows": []string{"ALL_TIME", "DAILY"}})
	s.create(t, map[string]any{"id": "stays"})
	for i, p := range []string{"a", "b", "c"} {
		s.submit(t, map[string]any{"board": "doomed", "playerId": p, "score": float64(10 + i), "eventId": "e" + p})
	}
	s.submit(t, map[string]any{"board": "stays", "playerId": "x", "score": 1})

	ctx := ctxT(t, 30*time.Second)
	type sub struct {
		conn *wstest.Conn
		id   string
	}
	tws := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	legacy := wstest.Dial(t, s.WSURL, wstest.LegacyWS, nil)
	subs := []sub{{tws, "top"}, {tws, "rank"}, {legacy, "top-legacy"}, {tws, "closes"}}
	for _, sb := range subs {
		q, vars := topUpdatesSub, map[string]any{"b": "doomed", "n": 10}
		switch sb.id {
		case "rank":
			q, vars = rankUpdatesSub, map[string]any{"b": "doomed", "p": "b"}
		case "closes":
			q, vars = periodClosedSub, map[string]any{"b": "doomed"}
		}
		if err := sb.conn.Subscribe(sb.id, q, vars); err != nil {
			t.Fatal(err)
		}
		if sb.id == "closes" { // sends nothing until a period closes: wait until it has started
			waitMetric(t, s, `lb_subscriptions{field="periodClosed"}`, 1, 5*time.Second)
			continue
		}
		sb.conn.NextData(t, ctx, sb.id, nil)
	}
	if err := tws.Subscribe("other", topUpdatesSub, map[string]any{"b": "stays", "n": 10}); err != nil {
		t.Fatal(err)
	}
	tws.NextData(t, ctx, "other", nil)

	s.wantCode(t, testSubmitKey, "FORBIDDEN", deleteMutation, map[string]any{"id": "doomed"})
	s.wantCode(t, "", "UNAUTHENTICATED", deleteMutation, map[string]any{"id": "doomed"})
	var out struct{ DeleteLeaderboard bool }
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "doomed"}, &out)
	if !out.DeleteLeaderboard {
		t.Fatal("deleteLeaderboard = false for an existing board")
	}

	// Right after the call: reads and writes are NOT_FOUND, the board is gone from the list.
	s.wantCode(t, "", "NOT_FOUND", `query { top(board: "doomed") { playerId } }`, nil)
	s.wantCode(t, testSubmitKey, "NOT_FOUND", submitMutation,
		map[string]any{"in": map[string]any{"board": "doomed", "playerId": "a", "score": 1}})
	var q struct {
		Leaderboard  *struct{ ID string }
		Leaderboards []struct{ ID string }
	}
	s.must(t, "", `query { leaderboard(id: "doomed") { id } leaderboards { id } }`, nil, &q)
	if q.Leaderboard != nil {
		t.Fatal("leaderboard(id) still shows the deleted board")
	}
	for _, b := range q.Leaderboards {
		if b.ID == "doomed" {
			t.Fatal("leaderboards still lists the deleted board")
		}
	}

	// Every subscriber of the board: one NOT_FOUND error, then complete (the subscriptions of one connection end
	// in any order).
	for _, conn := range []*wstest.Conn{tws, legacy} {
		ended := map[string]bool{} // subscription id -> ended
		for _, sb := range subs {
			if sb.conn == conn {
				ended[sb.id] = false
			}
		}
		errored := map[string]bool{}
		for left := len(ended); left > 0; {
			m, err := conn.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if done, ok := ended[m.ID]; !ok || done {
				t.Fatalf("unexpected %s %s: %s", m.Type, m.ID, m.Payload)
			}
			if !errored[m.ID] {
				if errs := m.Errors(); len(errs) != 1 || errs[0].Code() != string(leaderboard.NotFound) {
					t.Fatalf("%s: want a NOT_FOUND error, got %s: %s", m.ID, m.Type, m.Payload)
				}
				errored[m.ID] = true
				if m.Type == "error" { // an error message ends the operation by itself
					ended[m.ID], left = true, left-1
				}
				continue
			}
			if m.Type != "complete" { // a data message with the error is followed by complete
				t.Fatalf("%s: want complete, got %s: %s", m.ID, m.Type, m.Payload)
			}
			ended[m.ID], left = true, left-1
		}
	}
	// The other board's subscription still works on the same connection.
	s.submit(t, map[string]any{"board": "stays", "playerId": "y", "score": 2})
	tws.NextData(t, ctx, "other", nil)

	tws.Close()
	legacy.Close()
	<-tws.Done()
	<-legacy.Done()
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > base && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "doomed"}, &out)
	if out.DeleteLeaderboard {
		t.Fatal("deleteLeaderboard = true for a board that does not exist")
	}
	s.create(t, map[string]any{"id": "doomed", "windows": []string{"ALL_TIME", "DAILY"}})
	if top := s.top(t, "doomed", 10); len(top) != 0 {
		t.Fatalf("the re-created board has entries: %+v", top)
	}
	r := s.submit(t, map[string]any{"board": "doomed", "playerId": "a", "score": 5, "eventId": "ea"})
	if r.Duplicate || r.PreviousRank != nil || r.Entry.Rank != 1 || r.Entry.Score != 5 {
		t.Fatalf("first submission to the re-created board: %+v", r)
	}

}

// TestDeleteLeaderboardOtherServer: a board deleted through one server, as seen by a second server on the same
// Redis that had its definition cached and its top list live: leaderboard(id) is null there at once; its
// subscriber gets NOT_FOUND; from then on its top is NOT_FOUND (its cached list is dropped); its board list drops
// the board within a second or two (the list is cached for a second).
func TestDeleteLeaderboardOtherServer(t *testing.T) {
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	a.create(t, map[string]any{"id": "shared"})
	a.submit(t, map[string]any{"board": "shared", "playerId": "p", "score": 3})
	var q struct{ Leaderboard *struct{ ID string } }
	b.must(t, "", `query { leaderboard(id: "shared") { id } }`, nil, &q)
	if q.Leaderboard == nil {
		t.Fatal("the second server does not see the board")
	}
	if top := b.top(t, "shared", 10); len(top) != 1 {
		t.Fatalf("second server's top: %+v", top)
	}
	ctx := ctxT(t, 30*time.Second)
	conn := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	if err := conn.Subscribe("s", topUpdatesSub, map[string]any{"b": "shared", "n": 10}); err != nil {
		t.Fatal(err)
	}
	conn.NextData(t, ctx, "s", nil)

	a.must(t, testAdminKey, deleteMutation, map[string]any{"id": "shared"}, nil)
	b.must(t, "", `query { leaderboard(id: "shared") { id } }`, nil, &q)
	if q.Leaderboard != nil {
		t.Fatal("the second server still shows the deleted board")
	}
	m, err := conn.Next(ctx)
	if errs := m.Errors(); err != nil || len(errs) != 1 || errs[0].Code() != "NOT_FOUND" {
		t.Fatalf("second server's subscriber: %+v %v; want NOT_FOUND", m, err)
	}
	b.wantCode(t, "", "NOT_FOUND", `query { top(board: "shared") { playerId } }`, nil)
	for deadline := time.Now().Add(5 * time.Second); ; {
		var l struct{ Leaderboards []struct{ ID string } }
		b.must(t, "", `query { leaderboards { id } }`, nil, &l)
		listed := false
		for _, x := range l.Leaderboards {
			listed = listed || x.ID == "shared"
		}
		if !listed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second server still lists the deleted board after 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDeleteLeaderboardEmbedded: deletion works on the embedded store too (EVAL scripts, plain pub/sub): the
// board and all its keys go, and the id starts empty when created again.
func TestDeleteLeaderboardEmbedded(t *testing.T) {
	cfg := testConfig(t)
	cfg.RedisURL = ""
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "emb", "windows": []string{"ALL_TIME", "WEEKLY"}, "exactTop": 2})
	for i, p := range []string{"a", "b", "c", "d"} {
		s.submit(t, map[string]any{"board": "emb", "playerId": p, "score": float64(i), "eventId": "e" + p})
	}
	var out struct{ DeleteLeaderboard bool }
	s.must(t, testAdminKey, deleteMutation, map[string]any{"id": "emb"}, &out)
	if !out.DeleteLeaderboard {
		t.Fatal("deleteLeaderboard = false")
	}
	ctx := ctxT(t, 10*time.Second)
	keys, err := s.Store.Redis().Keys(ctx, s.Store.BoardKeys("emb")).Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left: %v %v", keys, err)
	}
	s.wantCode(t, "", "NOT_FOUND", `query { top(board: "emb") { playerId } }`, nil)
	s.create(t, map[string]any{"id": "emb", "windows": []string{"ALL_TIME", "WEEKLY"}, "exactTop": 2})
	if r := s.submit(t, map[string]any{"board": "emb", "playerId": "d", "score": 1, "eventId": "ed"}); r.Duplicate ||
		r.PreviousRank != nil || r.Entry.Rank != 1 {
		t.Fatalf("first submission to the re-created board: %+v", r)
	}
}
