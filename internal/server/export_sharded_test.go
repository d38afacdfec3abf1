package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// An export of a sharded board that a writer keeps reshuffling is consistent in itself: ranks 1..n once each in
// order, every player once, scores in the board's order, each row's tieRank 1 + the rows with a better score and
// its topPercent 100 * rank / n (every player of this board is in the exact ranking, so n is the size).
func TestExportShardedUnderWrites(t *testing.T) {
	t.Parallel()
	clock := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := testConfig(t)
	cfg.Clock = func() time.Time { return clock }
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "sh", "mode": "LATEST", "shards": 3})
	st := leaderboard.New(s.Store.Redis(), leaderboard.Config{Prefix: cfg.KeyPrefix,
		PublishCommand: leaderboard.PublishNone, Clock: cfg.Clock})
	ctx := context.Background()
	const players = 3000
	rng := rand.New(rand.NewPCG(3, 9))
	var subs []leaderboard.Submission
	for i := range players {
		subs = append(subs, leaderboard.Submission{Board: "sh", Player: fmt.Sprintf("p%04d", i), Score: float64(rng.IntN(50))})
		if len(subs) == 100 {
			if _, err := st.SubmitMany(ctx, subs); err != nil {
				t.Fatal(err)
			}
			subs = subs[:0]
		}
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(5, 1))
		for !stop.Load() {
			var b []leaderboard.Submission
			for range 20 {
				b = append(b, leaderboard.Submission{Board: "sh", Player: fmt.Sprintf("p%04d", r.IntN(players+200)),
					Score: float64(r.IntN(50))})
			}
			_, _ = st.SubmitMany(ctx, b)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for round := range 3 {
		resp := s.exportGet(t, "", "sh", map[string]string{"format": "ndjson"})
		if resp.StatusCode != 200 {
			t.Fatalf("export: %d", resp.StatusCode)
		}
		var rows []momentRow
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r momentRow
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		resp.Body.Close()
		seen := map[string]bool{}
		for i, r := range rows {
			if i > 0 && r.Score > rows[i-1].Score {
				t.Fatalf("round %d: row %d score %v after %v", round, i, r.Score, rows[i-1].Score)
			}
			if r.Rank != int64(i+1) || seen[r.PlayerID] {
				t.Fatalf("round %d: row %d rank %d player %s (seen %v)", round, i, r.Rank, r.PlayerID, seen[r.PlayerID])
			}
			seen[r.PlayerID] = true
			// DESC: rows before with a strictly higher score.
			if want := int64(tieStart(rows, i) + 1); r.TieRank != want {
				t.Fatalf("round %d: row %d tieRank %d, want %d", round, i, r.TieRank, want)
			}
			if want := 100 * float64(i+1) / float64(len(rows)); math.Abs(r.TopPercent-want) > 1e-9 {
				t.Fatalf("round %d: row %d topPercent %v, want %v (rows %d)", round, i, r.TopPercent, want, len(rows))
			}
		}
		if len(rows) < players {
			t.Fatalf("round %d: %d rows", round, len(rows))
		}
	}
}

// tieStart is the index of the first row with rows[i]'s score (rows in rank order, DESC).
func tieStart(rows []momentRow, i int) int {
	for i > 0 && rows[i-1].Score == rows[i].Score {
		i--
	}
	return i
}
