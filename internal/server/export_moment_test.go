package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// momentModel replays the submissions of TestExportOneMoment: submission i (0-based, in the order Redis applied
// them: the writer sends one batch at a time and a batch is one script) gives player players[i] the score
// scores[i], names it "i<i>", and was achieved at base + i seconds. Every submission changes the player's score
// (the writer makes sure), so each one is a new arrival: on a LATEST board a player's arrival is its last
// submission's index.
type momentModel struct {
	players []int
	scores  []float64
	base    time.Time
}

// add records submission len(m.players) and returns its index.
func (m *momentModel) add(player int, score float64) int {
	m.players = append(m.players, player)
	m.scores = append(m.scores, score)
	return len(m.players) - 1
}

func (m *momentModel) name(i int) string { return "i" + strconv.Itoa(i) }

// meta is submission i's metadata: its index, padded so that an export is larger than the sockets between server
// and client hold (the server then reads its pages while the writer goes on).
func (m *momentModel) meta(i int) string {
	return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 700))
}

func (m *momentModel) at(i int) time.Time { return m.base.Add(time.Duration(i) * time.Second) }

// momentRow is one exported NDJSON row.
type momentRow struct {
	PlayerID    string          `json:"playerId"`
	DisplayName *string         `json:"displayName"`
	Rank        int64           `json:"rank"`
	TieRank     int64           `json:"tieRank"`
	Approximate bool            `json:"approximate"`
	Score       float64         `json:"score"`
	TopPercent  float64         `json:"topPercent"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	Metadata    json.RawMessage `json:"metadata"`
}

// TestExportOneMoment: an export of a LATEST board that a writer keeps reshuffling while the export streams (the
// client reads a page, then waits for more writes) is the standings of one moment. Checked against a replay of
// the writes, never against the store's reads: every player exactly once; the rows' names say which submission
// each player's row comes from, and one prefix of the write sequence must explain all of them (no row from
// before a write that another row already shows, none from after); and every row, field for field, is the
// model's row at that prefix: rank and order (score, then first arrival), tieRank, topPercent, score, name,
// metadata and updatedAt of the same submission.
func TestExportOneMoment(t *testing.T) {
	clock := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := testConfig(t)
	cfg.Clock = func() time.Time { return clock }
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "moving", "mode": "LATEST"})
	st := leaderboard.New(s.Store.Redis(), leaderboard.Config{Prefix: cfg.KeyPrefix,
		PublishCommand: leaderboard.PublishNone, Clock: cfg.Clock})
	ctx := context.Background()

	const players, scoreRange, batch = 4000, 100, 100
	m := &momentModel{base: clock.Add(-30 * 24 * time.Hour)}
	rng := rand.New(rand.NewPCG(7, 43))
	current := make([]float64, players)
	submitBatch := func(items []int) error {
		subs := make([]leaderboard.Submission, len(items))
		for k, i := range items {
			name := m.name(i)
			subs[k] = leaderboard.Submission{Board: "moving", Player: fmt.Sprintf("p%04d", m.players[i]),
				Score: m.scores[i], DisplayName: &name, Metadata: json.RawMessage(m.meta(i)), AchievedAt: m.at(i)}
		}
		outs, err := st.SubmitMany(ctx, subs)
		for _, o := range outs {
			if err == nil && o.Err != nil {
				err = o.Err
			}
		}
		return err
	}
	for start := 0; start < players; start += batch {
		var items []int
		for p := start; p < start+batch; p++ {
			current[p] = float64(rng.IntN(scoreRange))
			items = append(items, m.add(p, current[p]))
		}
		if err := submitBatch(items); err != nil {
			t.Fatal(err)
		}
	}

	// The writer: batches of moves, each a new score for a random player, until the reader is done. applied
	// counts the batches Redis has applied; the model's length is only read after the writer stopped.
	var applied atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var items []int
			for range batch {
				p := rng.IntN(players)
				score := float64(rng.IntN(scoreRange))
				for score == current[p] {
					score = float64(rng.IntN(scoreRange))
				}
				current[p] = score
				items = append(items, m.add(p, score))
			}
			if writeErr = submitBatch(items); writeErr != nil {
				return
			}
			applied.Add(1)
		}
	}()
	// waitWrites waits until the writer has applied n more batches (a generous bound, not a sleep).
	waitWrites := func(n int64) {
		target := applied.Load() + n
		for deadline := time.Now().Add(30 * time.Second); applied.Load() < target; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the writer applied %d batches in 30 s", applied.Load())
			}
		}
	}

	waitWrites(1)
	resp := s.exportGet(t, "", "moving", map[string]string{"format": "ndjson"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var rows []momentRow
	for sc.Scan() {
		var row momentRow
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %d: %v", len(rows)+1, err)
		}
		rows = append(rows, row)
		if len(rows)%500 == 0 {
			waitWrites(3) // the board moves while the client is in the middle of the file
		}
	}
	resp.Body.Close()
	close(stop)
	wg.Wait()
	if sc.Err() != nil || writeErr != nil {
		t.Fatalf("read: %v; write: %v", sc.Err(), writeErr)
	}
	t.Logf("%d rows; %d submissions, %d of them while the export ran", len(rows), len(m.players),
		len(m.players)-players)

	// Every player exactly once.
	seen := make(map[string]int, players)
	for _, r := range rows {
		seen[r.PlayerID]++
	}
	var twice, missing []string
	for p := range players {
		id := fmt.Sprintf("p%04d", p)
		switch seen[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 || len(missing) > 0 || len(rows) != players {
		t.Fatalf("%d rows for %d players: %d players more than once (%v), %d missing (%v)", len(rows), players,
			len(twice), twice[:min(5, len(twice))], len(missing), missing[:min(5, len(missing))])
	}

	// The moment: row p comes from submission j_p (its name). The export is the state after the first k+1
	// submissions for some k with j_p <= k < the next submission of p, for every p.
	next := make([]int, len(m.players)) // the index of the player's next submission (len: none)
	last := make([]int, players)
	for p := range last {
		last[p] = len(m.players)
	}
	for i := len(m.players) - 1; i >= 0; i-- {
		next[i], last[m.players[i]] = last[m.players[i]], i
	}
	lo, hi := 0, len(m.players)-1
	for _, r := range rows {
		if r.DisplayName == nil || !strings.HasPrefix(*r.DisplayName, "i") {
			t.Fatalf("row %+v: no submission name", r)
		}
		j, err := strconv.Atoi((*r.DisplayName)[1:])
		if err != nil || j >= len(m.players) || fmt.Sprintf("p%04d", m.players[j]) != r.PlayerID {
			t.Fatalf("row %s named %q: not one of its submissions", r.PlayerID, *r.DisplayName)
		}
		lo, hi = max(lo, j), min(hi, next[j]-1)
	}
	if lo > hi {
		t.Fatalf("no moment explains the rows: one row shows submission %d, another a state before submission %d",
			lo, hi+1)
	}

	// The model's standings after submissions 0..lo, field for field.
	type standing struct {
		player int
		sub    int // the submission that gave the score: its arrival
	}
	state := make([]int, players)
	for i := 0; i <= lo; i++ {
		state[m.players[i]] = i
	}
	want := make([]standing, players)
	for p := range players {
		want[p] = standing{p, state[p]}
	}
	slices.SortFunc(want, func(a, b standing) int {
		if sa, sb := m.scores[a.sub], m.scores[b.sub]; sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		return a.sub - b.sub
	})
	tie := int64(1)
	for i, w := range want {
		r := rows[i]
		rank := int64(i + 1)
		if i > 0 && m.scores[w.sub] != m.scores[want[i-1].sub] {
			tie = rank
		}
		var meta, wantMeta any
		_ = json.Unmarshal(r.Metadata, &meta)
		_ = json.Unmarshal([]byte(m.meta(w.sub)), &wantMeta)
		if r.PlayerID != fmt.Sprintf("p%04d", w.player) || r.Rank != rank || r.TieRank != tie || r.Approximate ||
			r.Score != m.scores[w.sub] || r.TopPercent != 100*float64(rank)/players ||
			*r.DisplayName != m.name(w.sub) || !r.UpdatedAt.Equal(m.at(w.sub)) || fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
			t.Fatalf("row %d: %s rank %d tieRank %d score %v topPercent %v name %s updatedAt %v; the model after "+
				"submission %d: p%04d rank %d tieRank %d score %v topPercent %v name %s updatedAt %v", i+1,
				r.PlayerID, r.Rank, r.TieRank, r.Score, r.TopPercent, *r.DisplayName, r.UpdatedAt, lo, w.player,
				rank, tie, m.scores[w.sub], 100*float64(rank)/players, m.name(w.sub), m.at(w.sub))
		}
	}
}
