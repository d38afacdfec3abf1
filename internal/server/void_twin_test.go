package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// A void leaves a board exactly as a twin board fed the same writes but the voided submissions, at the same
// moments, would be (the oracle): every entry of every window and period with every field (rank, tie order,
// score, SUM total, LATEST score, name, metadata, updatedAt, size); so does a rebuild and a restore after Redis
// lost the board. Each mode, on ALL_TIME and DAILY across two days, with removals in the history, the voided
// events including players' latest (LATEST falls back), a removed player's, and ones that set a name or metadata.
func TestLedgerVoidMatchesATwin(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"LATEST", "SUM", "BEST"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			s := startServer(t, ledgerConfig(t, clock))
			def := func(id string) map[string]any {
				// A day of grace: no period closes while the test runs.
				return map[string]any{"id": id, "mode": mode, "windows": []string{"ALL_TIME", "DAILY"},
					"graceSeconds": 86400}
			}
			s.create(t, def("a"))
			s.create(t, def("twin"))

			type write struct {
				in     map[string]any
				remove string
			}
			var writes []write
			lastOf := map[string]int{} // a player's latest submission, by index of writes
			for i := range 60 {
				player := fmt.Sprintf("p%d", (i*7)%9)
				in := map[string]any{"playerId": player, "score": float64((i*5)%4) + 1, "eventId": fmt.Sprintf("e%d", i)}
				if i%3 == 0 {
					in["displayName"] = fmt.Sprintf("Name %d", i)
				}
				if i%4 == 1 {
					in["metadata"] = map[string]any{"i": i}
				}
				lastOf[player] = len(writes)
				writes = append(writes, write{in: in})
				if i == 25 || i == 47 {
					writes = append(writes, write{remove: player})
				}
			}
			voided := map[int]bool{}
			for i, w := range writes {
				id, _ := w.in["eventId"].(string)
				if w.remove == "" && (i%5 == 2 || id == "e9" || id == "e13") {
					voided[i] = true
				}
			}
			for _, p := range []string{"p0", "p4", "p5"} {
				voided[lastOf[p]] = true
			}
			var voidIDs []string
			for i, w := range writes {
				if voided[i] {
					voidIDs = append(voidIDs, w.in["eventId"].(string))
				}
			}
			for i, w := range writes {
				clock.Set(ledgerStart.Add(time.Duration(i) * 29 * time.Minute)) // across two days
				for _, board := range []string{"a", "twin"} {
					switch {
					case w.remove != "":
						s.must(t, testAdminKey, `mutation($b: ID!, $p: ID!) { removePlayer(board: $b, playerId: $p) }`,
							map[string]any{"b": board, "p": w.remove}, nil)
					case board == "twin" && voided[i]:
					default:
						w.in["board"] = board
						s.submit(t, w.in)
					}
				}
			}
			views := func(board string) []leaderboard.View {
				return []leaderboard.View{{Board: board, Window: leaderboard.AllTime},
					{Board: board, Window: leaderboard.Daily, Period: "2031-03-14"},
					{Board: board, Window: leaderboard.Daily, Period: "2031-03-15"}}
			}
			dump := func(board string) string {
				return strings.ReplaceAll(boardDump(t, s.Store, views(board)...), board+"/", "B/")
			}
			want := dump("twin")
			if dump("a") == want {
				t.Fatal("the voids would change nothing")
			}
			clock.Set(clock.Now().Add(time.Minute))
			var n struct{ VoidScoreEvents int }
			// The list names some twice, and one no submission has.
			ids := append(append([]string{}, voidIDs...), voidIDs[0], "no-such-event")
			s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": ids, "r": "probe"}, &n)
			if n.VoidScoreEvents != len(voidIDs) {
				t.Errorf("voided %d, want %d", n.VoidScoreEvents, len(voidIDs))
			}
			if got := dump("a"); got != want {
				t.Fatalf("after the void:\n%s\nthe twin:\n%s", got, want)
			}
			s.must(t, testAdminKey, voidMutation, map[string]any{"b": "a", "ids": voidIDs, "r": "again"}, &n)
			if n.VoidScoreEvents != 0 {
				t.Errorf("voided again: %d", n.VoidScoreEvents)
			}
			var rb struct{ RebuildLeaderboard bool }
			s.must(t, testAdminKey, rebuildMutation, map[string]any{"id": "a"}, &rb)
			if got := dump("a"); got != want {
				t.Fatalf("after a rebuild:\n%s\nthe twin:\n%s", got, want)
			}
			// Redis loses the board: restored, the same.
			deleteBoardKeys(t, s, "a")
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				r := s.do(t, "", `{ top(board: "a") { playerId } }`, nil)
				if len(r.Errors) == 0 {
					break
				}
				if c := r.Codes(); len(c) != 1 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) {
					t.Fatalf("reading the board while it is restored: %+v", r.Errors)
				}
			}
			if got := dump("a"); got != want {
				t.Fatalf("restored:\n%s\nthe twin:\n%s", got, want)
			}
			// A retry of every submission after the restore (voided ones, removed players' too) is a duplicate and
			// changes nothing.
			for i, w := range writes {
				if w.remove != "" {
					continue
				}
				clock.Set(ledgerStart.Add(time.Duration(i) * 29 * time.Minute))
				w.in["board"] = "a"
				var out struct{ SubmitScore scoreResult }
				s.must(t, testSubmitKey, submitMutation, map[string]any{"in": w.in}, &out)
				if !out.SubmitScore.Duplicate {
					t.Fatalf("retry of %v: %+v", w.in["eventId"], out.SubmitScore)
				}
			}
			clock.Set(clock.Now().Add(time.Hour))
			if got := dump("a"); got != want {
				t.Fatalf("after the retries:\n%s\nthe twin:\n%s", got, want)
			}
		})
	}
}
