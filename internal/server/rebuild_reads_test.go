package server

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// While rebuildLeaderboard rebuilds a board (slowed by LEDGER_RESTORE_RATE), every read of it — top, rank,
// aroundMe, friends, the board's size, periods, the export — answers UNAVAILABLE or exactly what it answered
// before, never NOT_FOUND, an empty or a partial list; a write meanwhile is applied once (a SUM total).
func TestLedgerReadsDuringRebuild(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.LedgerRestoreRate = 150 // 300 events: about 2 s
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "slow", "mode": "SUM", "windows": []string{"ALL_TIME", "DAILY"},
		"graceSeconds": 86400})
	var inputs []map[string]any
	for i := range 300 {
		in := map[string]any{"board": "slow", "playerId": fmt.Sprintf("p%02d", i%40), "score": float64(i % 7),
			"displayName": fmt.Sprintf("N%d", i%11), "eventId": fmt.Sprintf("e%d", i)}
		if i%5 == 0 {
			in["metadata"] = map[string]any{"i": i}
		}
		inputs = append(inputs, in)
	}
	var bulk struct{ SubmitScores []scoreResult }
	for i := 0; i < len(inputs); i += 100 {
		s.must(t, testSubmitKey, submitsMutation, map[string]any{"in": inputs[i : i+100]}, &bulk)
	}
	reads := map[string]struct {
		query string
		vars  map[string]any
	}{
		"top":     {`{ top(board: "slow", first: 100) { ` + entryFields + ` } }`, nil},
		"daily":   {`{ top(board: "slow", first: 100, window: DAILY) { ` + entryFields + ` } }`, nil},
		"rank":    {`{ rank(board: "slow", playerId: "p07") { ` + entryFields + ` } }`, nil},
		"around":  {`{ aroundMe(board: "slow", playerId: "p20", radius: 3) { ` + entryFields + ` } }`, nil},
		"friends": {`{ friends(board: "slow", playerId: "p01", friendIds: ["p02", "p39"]) { ` + entryFields + ` } }`, nil},
		"size":    {`{ leaderboard(id: "slow") { id size daily: size(window: DAILY) periods(window: DAILY) { period } } }`, nil},
	}
	before := map[string]string{}
	for name, r := range reads {
		resp := s.do(t, "", r.query, r.vars)
		if len(resp.Errors) > 0 {
			t.Fatalf("%s before: %+v", name, resp.Errors)
		}
		before[name] = string(resp.Data)
	}
	export := func() (int, string) {
		resp := s.exportGet(t, "", "slow", map[string]string{"format": "ndjson"})
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if code, body := export(); code != 200 || strings.Count(body, "\n") != 40 {
		t.Fatalf("export before: %d\n%s", code, body)
	}
	_, exportBefore := export()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var rebuildErr []gqlError
	go func() {
		defer wg.Done()
		defer close(done)
		rebuildErr = s.do(t, testAdminKey, rebuildMutation, map[string]any{"id": "slow"}).Errors
	}()
	unavailable, same := 0, 0
	wrote := false
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		for name, r := range reads {
			resp := s.do(t, "", r.query, r.vars)
			switch {
			case len(resp.Errors) == 0 && string(resp.Data) == before[name]:
				same++
			case len(resp.Errors) > 0 && !slices.ContainsFunc(resp.Codes(), func(c string) bool { return c != "UNAVAILABLE" }):
				// One error, or one per field of the board (size, daily, periods) when its definition was read
				// before the rebuild began.
				unavailable++
			default:
				t.Fatalf("%s during the rebuild: %s %+v\nbefore: %s", name, resp.Data, resp.Errors, before[name])
			}
		}
		switch code, body := export(); {
		case code == 200 && body == exportBefore:
		case code == 503 && strings.Contains(body, `"UNAVAILABLE"`):
		default:
			t.Fatalf("export during the rebuild: %d\n%s", code, body)
		}
		if !wrote && unavailable > 0 {
			// A write while the board is rebuilt: applied once, whatever it answers.
			wrote = true
			r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "slow",
				"playerId": "p07", "score": 1000, "eventId": "during"}})
			if len(r.Errors) > 0 && r.Codes()[0] != "UNAVAILABLE" {
				t.Fatalf("a write during the rebuild: %+v", r.Errors)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if len(rebuildErr) > 0 {
		t.Fatalf("rebuildLeaderboard: %+v", rebuildErr)
	}
	if unavailable == 0 {
		t.Fatal("no read found the board being rebuilt")
	}
	t.Logf("%d reads UNAVAILABLE, %d as before", unavailable, same)
	// The write, retried until it answers, counts once.
	var out struct{ SubmitScore scoreResult }
	s.must(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "slow",
		"playerId": "p07", "score": 1000, "eventId": "during"}}, &out)
	total := 1000.0
	for _, in := range inputs {
		if in["playerId"] == "p07" {
			total += in["score"].(float64)
		}
	}
	var rank struct{ Rank *entry }
	s.must(t, "", `{ rank(board: "slow", playerId: "p07") { score } }`, nil, &rank)
	if rank.Rank == nil || rank.Rank.Score != total {
		b, _ := json.Marshal(rank.Rank)
		t.Errorf("p07 after the rebuild and the write: %s, want score %v", b, total)
	}
}
