package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// closedModel is the test's own ranking of what was submitted: per player the stored score, the arrival (the
// number of the submission that last changed it) and whether it has a score.
type closedModel struct {
	order, mode string
	score       map[string]float64
	arrival     map[string]int
}

func (m *closedModel) better(a, b float64) bool {
	if m.order == "ASC" {
		return a < b
	}
	return a > b
}

func (m *closedModel) apply(i int, p string, v float64) {
	cur, ok := m.score[p]
	switch {
	case !ok:
		m.score[p], m.arrival[p] = v, i
	case m.mode == "BEST":
		if m.better(v, cur) {
			m.score[p], m.arrival[p] = v, i
		}
	case m.mode == "LATEST":
		if v != cur {
			m.score[p], m.arrival[p] = v, i
		}
	case m.mode == "SUM":
		if v != 0 {
			m.score[p], m.arrival[p] = cur+v, i
		}
	}
}

type closedRow struct {
	player        string
	rank, tieRank int
	score, topPct float64
}

// ranking is every player in rank order, with tie ranks and topPercent.
func (m *closedModel) ranking() []closedRow {
	ps := make([]string, 0, len(m.score))
	for p := range m.score {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b string) int {
		if m.score[a] != m.score[b] {
			if m.better(m.score[a], m.score[b]) {
				return -1
			}
			return 1
		}
		return m.arrival[a] - m.arrival[b]
	})
	out := make([]closedRow, len(ps))
	for i, p := range ps {
		tie := 1
		for _, q := range ps {
			if m.better(m.score[q], m.score[p]) {
				tie++
			}
		}
		out[i] = closedRow{player: p, rank: i + 1, tieRank: tie, score: m.score[p],
			topPct: 100 * float64(i+1) / float64(len(ps))}
	}
	return out
}

// A closed DAILY period read while Redis holds it, after Redis lost the board (restored within the retention),
// and after its keys are gone for good (past the retention: frozen standings) answers the same bytes for top,
// rank, aroundMe, friends, size, periods and the export, and they agree with the close event and with the test's
// own model of the submissions: every mode and order, sharded boards, exactTop tails, time zones.
func TestClosedPeriodReadsAgree(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, order, mode, tz string
		shards, exactTop      int
	}{
		{"best-desc", "DESC", "BEST", "UTC", 1, 0},
		{"latest-asc-sharded-la", "ASC", "LATEST", "America/Los_Angeles", 3, 0},
		{"sum-desc-sharded-exact-akl", "DESC", "SUM", "Pacific/Auckland", 3, 6},
		{"best-asc-exact-kolkata", "ASC", "BEST", "Asia/Kolkata", 1, 6},
		{"sum-desc", "DESC", "SUM", "UTC", 1, 0},
		{"best-desc-sharded", "DESC", "BEST", "Europe/Berlin", 3, 0},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			cfg := ledgerConfig(t, clock)
			cfg.Closes.CheckInterval = 20 * time.Millisecond
			s := startServer(t, cfg)
			def := map[string]any{"id": "fz", "windows": []string{"DAILY", "ALL_TIME"}, "order": c.order,
				"mode": c.mode, "timezone": c.tz, "shards": c.shards, "closeEventTop": 1000, "graceSeconds": 120}
			if c.exactTop > 0 {
				def["exactTop"] = c.exactTop
			}
			s.create(t, def)
			loc, _ := time.LoadLocation(c.tz)
			local := ledgerStart.In(loc)
			period := local.Format("2006-01-02")
			end := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
			m := &closedModel{order: c.order, mode: c.mode, score: map[string]float64{}, arrival: map[string]int{}}
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			const players = 24
			at := ledgerStart
			step := end.Sub(ledgerStart) / 80
			for i := range 60 {
				p := fmt.Sprintf("p%02d", rng.IntN(players))
				v := float64(rng.IntN(9)) // ties
				if c.mode == "SUM" {
					v -= 3
				}
				if rng.IntN(5) == 0 {
					v += 0.5
				}
				in := map[string]any{"board": "fz", "playerId": p, "score": v, "eventId": fmt.Sprintf("e%d", i)}
				if rng.IntN(3) == 0 {
					in["displayName"] = fmt.Sprintf("Name %s/%d", p, i)
				}
				if rng.IntN(4) == 0 {
					in["metadata"] = map[string]any{"i": i, "s": "x,\"y\""}
				}
				at = at.Add(step)
				clock.Set(at)
				s.submit(t, in)
				m.apply(i, p, v)
			}
			want := m.ranking()
			closeAt := end.Add(120*time.Second + time.Minute)
			clock.Set(closeAt)
			waitUntil(t, 10*time.Second, "the day's close event", func() bool {
				evs, err := s.Store.Closes(ctxT(t, 5*time.Second), "fz", "0-0", 10)
				return err == nil && len(evs) == 1
			})
			evs, _ := s.Store.Closes(ctxT(t, 5*time.Second), "fz", "0-0", 10)
			ev := evs[0]
			if ev.Period != period || ev.Size != int64(len(want)) || !ev.EndedAt.Equal(end) {
				t.Fatalf("close event %s size %d ended %s; want %s %d %s", ev.Period, ev.Size, ev.EndedAt, period,
					len(want), end)
			}
			exact := len(want)
			if c.exactTop > 0 {
				exact = min(exact, c.exactTop)
			}
			if len(ev.Top) != exact {
				t.Fatalf("close event top of %d rows, want %d", len(ev.Top), exact)
			}
			for i, e := range ev.Top {
				w := want[i]
				if e.PlayerID != w.player || e.Rank != int64(w.rank) || e.TieRank != int64(w.tieRank) || e.Score != w.score ||
					math.Abs(e.TopPercent-w.topPct) > 1e-9 || e.Approximate {
					t.Fatalf("close event row %d: %+v; model %+v", i, e, w)
				}
			}
			// The reads: every exact-tier player's rank, aroundMe of a few, friends across the exact tier.
			var q strings.Builder
			q.WriteString(`query($p: String!) { top(board: "fz", window: DAILY, period: $p, first: 1000) { ` + entryFields + ` }
				leaderboard(id: "fz") { size(window: DAILY, period: $p) periods(window: DAILY) { period size endedAt } }`)
			var friendIDs []string
			for i := range exact {
				fmt.Fprintf(&q, " r%d: rank(board: \"fz\", window: DAILY, period: $p, playerId: %q) { %s }", i, want[i].player, entryFields)
				fmt.Fprintf(&q, " a%d: aroundMe(board: \"fz\", window: DAILY, period: $p, playerId: %q, radius: 2) { %s }", i, want[i].player, entryFields)
				friendIDs = append(friendIDs, want[i].player)
			}
			fj, _ := json.Marshal(append(friendIDs, "nobody"))
			fmt.Fprintf(&q, " f: friends(board: \"fz\", window: DAILY, period: $p, playerId: %q, friendIds: %s) { %s } }",
				want[0].player, fj, entryFields)
			query := q.String()
			vars := map[string]any{"p": period}
			exportRows := func() string {
				resp := s.exportGet(t, "", "fz", map[string]string{"window": "DAILY", "period": period, "format": "ndjson"})
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("export: %d %s", resp.StatusCode, body)
				}
				return string(body)
			}
			read := func(what string) (string, string) {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					r := s.do(t, "", query, vars)
					if len(r.Errors) == 0 {
						return string(r.Data), exportRows()
					}
					if c := r.Codes(); len(c) == 0 || c[0] != "UNAVAILABLE" || time.Now().After(deadline) {
						t.Fatalf("%s: %+v", what, r.Errors)
					}
				}
			}
			held, heldExport := read("while Redis holds the day")
			// Check the held answer against the close event (every field) and the model.
			var out struct {
				Top         []entry
				Leaderboard struct {
					Size    int
					Periods []struct {
						Period  string
						Size    int
						EndedAt time.Time
					}
				}
				F []entry
			}
			if err := json.Unmarshal([]byte(held), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Top) != exact || out.Leaderboard.Size != len(want) || len(out.Leaderboard.Periods) != 1 ||
				out.Leaderboard.Periods[0].Period != period || out.Leaderboard.Periods[0].Size != len(want) ||
				!out.Leaderboard.Periods[0].EndedAt.Equal(end) {
				t.Fatalf("held reads: %s", held)
			}
			for i, e := range out.Top {
				x := ev.Top[i]
				name := func(p *string) string {
					if p == nil {
						return "<nil>"
					}
					return *p
				}
				if e.PlayerID != x.PlayerID || e.Rank != int(x.Rank) || e.TieRank != int(x.TieRank) || e.Score != x.Score ||
					e.TopPercent != x.TopPercent || e.Approximate != x.Approximate || !e.UpdatedAt.Equal(x.UpdatedAt) ||
					name(e.DisplayName) != name(x.DisplayName) || compactJSON(e.Metadata) != compactJSON(x.Metadata) {
					t.Fatalf("top row %d %+v; close event %+v", i, e, x)
				}
			}
			var lines []string
			for sc := bufio.NewScanner(strings.NewReader(heldExport)); sc.Scan(); {
				lines = append(lines, sc.Text())
			}
			if len(lines) != exact {
				t.Fatalf("export of %d rows, want %d:\n%s", len(lines), exact, heldExport)
			}
			for i, l := range lines {
				var e entry
				if err := json.Unmarshal([]byte(l), &e); err != nil || e.PlayerID != out.Top[i].PlayerID ||
					e.Rank != out.Top[i].Rank || e.Score != out.Top[i].Score || !e.UpdatedAt.Equal(out.Top[i].UpdatedAt) {
					t.Fatalf("export row %d %s; top %+v", i, l, out.Top[i])
				}
			}
			// Redis loses the board within the retention: restored, the same answers.
			deletePrefixKeys(t, s)
			if got, gotExport := read("after a FLUSHALL"); got != held || gotExport != heldExport {
				t.Fatalf("after a FLUSHALL:\n%s\n%s\nwhile Redis held the day:\n%s\n%s", got, gotExport, held, heldExport)
			}
			// Past the retention, and Redis loses the board again: from the frozen standings.
			clock.Set(closeAt.Add(10 * 24 * time.Hour))
			deletePrefixKeys(t, s)
			if got, gotExport := read("from the frozen standings"); got != held || gotExport != heldExport {
				t.Fatalf("from the frozen standings:\n%s\n%s\nwhile Redis held the day:\n%s\n%s", got, gotExport, held, heldExport)
			}
			if n := countKeys(t, s, "fz", ":"+period); n != 0 && c.shards == 1 {
				t.Fatalf("Redis still holds %d keys of the day: the answer did not come from the ledger", n)
			}
		})
	}
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "!" + string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
