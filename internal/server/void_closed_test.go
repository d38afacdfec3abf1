package server

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// A void of submissions in a closed day of a SUM board (DAILY + ALL_TIME) leaves both windows as a twin fed all
// but the voided submissions has them: while Redis holds the day (a new frozen version), and once its keys
// expired and Redis lost the board (reads and the export of the day from the frozen standings), every field.
func TestLedgerVoidInAClosedDayMatchesATwin(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	cfg.Closes.CheckInterval = 20 * time.Millisecond
	s := startServer(t, cfg)
	for _, id := range []string{"a", "twin"} {
		s.create(t, map[string]any{"id": id, "mode": "SUM", "windows": []string{"DAILY", "ALL_TIME"},
			"graceSeconds": 60, "closeEventTop": 5})
	}
	voided := map[int]bool{3: true, 8: true, 17: true, 22: true}
	var voidIDs []string
	submit := func(i int) {
		in := map[string]any{"playerId": fmt.Sprintf("p%d", i%6), "score": float64(i%4) - 1,
			"eventId": fmt.Sprintf("e%d", i), "displayName": fmt.Sprintf("N%d", i%5)}
		if i%3 == 0 {
			in["metadata"] = map[string]any{"i": i}
		}
		for _, b := range []string{"a", "twin"} {
			if b == "twin" && voided[i] {
				continue
			}
			in["board"] = b
			s.submit(t, in)
		}
		if voided[i] {
			voidIDs = append(voidIDs, in["eventId"].(string))
		}
	}
	for i := range 20 { // the first day
		clock.Set(ledgerStart.Add(time.Duration(i) * 17 * time.Minute))
		submit(i)
	}
	clock.Set(ledgerStart.Add(15*time.Hour + 2*time.Minute)) // the first day and its grace are over
	waitUntil(t, 10*time.Second, "the day's close on both boards", func() bool {
		for _, b := range []string{"a", "twin"} {
			evs, err := s.Store.Closes(ctxT(t, 5*time.Second), b, "0-0", 10)
			if err != nil || len(evs) != 1 {
				return false
			}
		}
		return true
	})
	for i := 20; i < 25; i++ { // the second day
		clock.Set(ledgerStart.Add(16*time.Hour + time.Duration(i)*time.Minute))
		submit(i)
	}
	const day = "2031-03-14"
	query := `query($b: ID!, $p: String!) {
		day: top(board: $b, window: DAILY, period: $p, first: 50) { ` + entryFields + ` }
		rank(board: $b, window: DAILY, period: $p, playerId: "p3") { ` + entryFields + ` }
		aroundMe(board: $b, window: DAILY, period: $p, playerId: "p4", radius: 2) { ` + entryFields + ` }
		friends(board: $b, window: DAILY, period: $p, playerId: "p1", friendIds: ["p2", "p5"]) { ` + entryFields + ` }
		all: top(board: $b, window: ALL_TIME, first: 50) { ` + entryFields + ` }
		leaderboard(id: $b) { size(window: DAILY, period: $p) periods(window: DAILY) { period size endedAt } } }`
	read := func(b string) string {
		t.Helper()
		r := s.do(t, "", query, map[string]any{"b": b, "p": day})
		if len(r.Errors) > 0 {
			t.Fatalf("reads of %s: %+v", b, r.Errors)
		}
		return string(r.Data)
	}
	export := func(b, window string) string {
		t.Helper()
		resp := s.exportGet(t, "", b, map[string]string{"format": "ndjson", "window": window, "period": day})
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("export of %s: %d %s", b, resp.StatusCode, body)
		}
		return string(body)
	}
	if read("a") == read("twin") {
		t.Fatal("the voids would change nothing")
	}
	clock.Set(clock.Now().Add(time.Minute))
	var n struct{ VoidScoreEvents int }
	s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": voidIDs, "r": "probe"}, &n)
	if n.VoidScoreEvents != len(voidIDs) {
		t.Fatalf("voided %d, want %d", n.VoidScoreEvents, len(voidIDs))
	}
	if got, want := read("a"), read("twin"); got != want {
		t.Fatalf("after the void:\n%s\nthe twin:\n%s", got, want)
	}
	if got, want := export("a", "DAILY"), export("twin", "DAILY"); got != want {
		t.Fatalf("export of the day after the void:\n%s\nthe twin:\n%s", got, want)
	}
	exportHeld := export("twin", "DAILY")
	// Past the day's retention; Redis loses both boards: the day is read from the frozen standings.
	clock.Set(ledgerStart.Add(10 * 24 * time.Hour))
	deleteBoardKeys(t, s, "a")
	deleteBoardKeys(t, s, "twin")
	for _, b := range []string{"a", "twin"} {
		s.doAvailable(t, query, map[string]any{"b": b, "p": day})
	}
	// A correction carries the names and metadata of its moment (sameRows, freeze.go), the twin's version 1 those
	// of the close: the ranking is compared.
	if got, want := unnamed(t, read("a")), unnamed(t, read("twin")); got != want {
		t.Fatalf("from the frozen standings:\n%s\nthe twin's:\n%s", got, want)
	}
	if want := export("twin", "DAILY"); unnamedLines(t, want) != unnamedLines(t, exportHeld) {
		t.Fatalf("export of the twin's frozen day:\n%s\nwhile Redis held it:\n%s", want, exportHeld)
	}
	if got, want := unnamedLines(t, export("a", "DAILY")), unnamedLines(t, exportHeld); got != want {
		t.Fatalf("export of the frozen day:\n%s\nthe twin's:\n%s\nwhile Redis held it:\n%s", got, want, exportHeld)
	}
	if n := countKeys(t, s, "a", ":"+day); n != 0 {
		t.Fatalf("Redis still holds %d keys of the day", n)
	}
}

// unnamed is a JSON document without its displayName and metadata fields, re-encoded.
func unnamed(t *testing.T, doc string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "displayName")
			delete(v, "metadata")
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

// unnamedLines is unnamed of each line of an NDJSON document.
func unnamedLines(t *testing.T, doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(doc), "\n") {
		b.WriteString(unnamed(t, l) + "\n")
	}
	return b.String()
}
