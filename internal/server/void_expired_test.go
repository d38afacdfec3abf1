package server

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"encoding/json"
)

// A void of an event of a closed day whose keys have expired (the correction replays the board into scratch keys)
// on a sharded SUM board in a time zone: the correction event's standings are the model's without the voided
// events, and every read of the day right after the call (top, rank, the export) answers them; a second void of the
// same events voids nothing and sends nothing.
func TestVoidExpiredSharded(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		for _, expired := range []bool{false, true} {
			t.Run(fmt.Sprintf("shards=%d/expired=%v", shards, expired), func(t *testing.T) {
				t.Parallel()
				voidExpired(t, shards, expired)
			})
		}
	}
}

func voidExpired(t *testing.T, shards int, expired bool) {
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "vx", "windows": []string{"DAILY"}, "mode": "SUM", "shards": shards,
		"timezone": "Asia/Tokyo", "closeEventTop": 1000, "graceSeconds": 60})
	loc, _ := time.LoadLocation("Asia/Tokyo")
	local := ledgerStart.In(loc)
	period := local.Format("2006-01-02")
	end := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
	type sub struct {
		p  string
		v  float64
		id string
	}
	var subs []sub
	for i := range 30 {
		subs = append(subs, sub{fmt.Sprintf("p%d", i%9), float64(i%4 + 1), fmt.Sprintf("e%d", i)})
	}
	for i, x := range subs {
		clock.Set(ledgerStart.Add(time.Duration(i) * time.Minute))
		s.submit(t, map[string]any{"board": "vx", "playerId": x.p, "score": x.v, "eventId": x.id})
	}
	model := func(voided map[string]bool) []closedRow {
		m := &closedModel{order: "DESC", mode: "SUM", score: map[string]float64{}, arrival: map[string]int{}}
		for i, x := range subs {
			if !voided[x.id] {
				m.apply(i, x.p, x.v)
			}
		}
		return m.ranking()
	}
	check := func(what string, rows []closedRow, top []entry) {
		t.Helper()
		if len(top) != len(rows) {
			t.Fatalf("%s: %d rows, model %d", what, len(top), len(rows))
		}
		for i, e := range top {
			w := rows[i]
			if e.PlayerID != w.player || e.Rank != w.rank || e.TieRank != w.tieRank || e.Score != w.score {
				t.Fatalf("%s: row %d %+v, model %+v", what, i, e, w)
			}
		}
	}
	clock.Set(end.Add(2 * time.Minute))
	waitUntil(t, 10*time.Second, "the close event", func() bool {
		evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "vx", "0-0", 10)
		return err == nil && len(evs) == 1
	})
	if expired {
		clock.Set(end.Add(10 * 24 * time.Hour)) // past the retention
	}
	readTop := func() []entry {
		var out struct{ Top []entry }
		s.must(t, "", `query($p: String!) { top(board: "vx", window: DAILY, period: $p, first: 1000) { `+entryFields+` } }`,
			map[string]any{"p": period}, &out)
		return out.Top
	}
	exportTop := func() []entry {
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp := s.exportGet(t, "", "vx", map[string]string{"window": "DAILY", "period": period, "format": "ndjson"})
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if resp.StatusCode != 503 || !strings.Contains(string(body), "UNAVAILABLE") || time.Now().After(deadline) {
				t.Fatalf("export: %d %s", resp.StatusCode, body)
			}
		}
		var out []entry
		for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			if l == "" {
				continue
			}
			var e entry
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("export line %q: %v", l, err)
			}
			out = append(out, e)
		}
		return out
	}
	// The keys expire by the clock; read once so both stores have looked the frozen day up (and may remember it).
	if expired {
		deletePrefixKeys(t, s)
	}
	waitUntil(t, 10*time.Second, "the board restored", func() bool {
		return len(s.do(t, "", `{ top(board: "vx", window: DAILY, period: "`+period+`") { playerId } }`, nil).Errors) == 0
	})
	check("frozen top before the void", model(nil), readTop())
	check("export before the void", model(nil), exportTop())

	// A FLUSHALL takes the outbox with it: the void's events are those after its newest entry now.
	last, err := s.Store.LastCloseID(ctxT(t, 5*time.Second), "vx")
	if err != nil {
		t.Fatal(err)
	}
	voided := map[string]bool{"e4": true, "e13": true} // two of p4's events
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "vx", "ids": []string{"e4", "e13"}, "r": "dup"}, &n)
	if n.VoidScoreEvents != 2 {
		t.Fatalf("voided %d, want 2", n.VoidScoreEvents)
	}
	evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "vx", last, 10)
	if err != nil || len(evs) != 1 || evs[0].Version != 2 || evs[0].Reason == nil || *evs[0].Reason != "dup" {
		t.Fatalf("after the void: %d events %v; Redis holds %d keys of the day", len(evs), err, countKeys(t, s, "vx", ":"+period))
	}
	want := model(voided)
	var corr []entry
	for _, e := range evs[0].Top {
		corr = append(corr, entry{PlayerID: e.PlayerID, Rank: int(e.Rank), TieRank: int(e.TieRank), Score: e.Score})
	}
	if evs[0].Size != int64(len(want)) {
		t.Fatalf("correction size %d, model %d", evs[0].Size, len(want))
	}
	check("the correction event", want, corr)
	check("frozen top after the void", want, readTop())
	check("export after the void", want, exportTop())
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "vx", "ids": []string{"e4", "e13"}, "r": "dup"}, &n)
	if n.VoidScoreEvents != 0 {
		t.Fatalf("voiding again voided %d", n.VoidScoreEvents)
	}
	if evs, _ := s.Store.Closes(ctxT(t, 5*time.Second), "vx", last, 10); len(evs) != 1 {
		t.Fatalf("voiding again sent %d events", len(evs)-1)
	}
}
