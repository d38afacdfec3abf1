package leaderboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// Memory per player, measured with MEMORY USAGE over all keys of a board (ALL_TIME, 100,000 players named
// player-N, no metadata): at most 150 bytes without exactTop, and at most 80 bytes per tail player with exactTop.
// These are sizes, not timings: the same data gives the same bytes on any machine with the same Redis.
func TestMemoryPerPlayer(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	const players = 100_000
	tg := redistest.Targets(t)[0]
	ctx := context.Background()
	s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t), PublishCommand: lb.PublishNone})
	scores := make([]float64, players)
	for i := range scores {
		scores[i] = float64((i * 7919) % 1_000_003)
	}
	usage := func(board string) (total, index int64) {
		for _, k := range boardKeys(t, s, tg, board) {
			n, err := tg.Client.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if strings.Contains(k, ":z:") {
				index += n
			}
		}
		return total, index
	}

	mustBoard(t, s, lb.Board{ID: "plain"})
	load(t, s, "plain", scores)
	total, _ := usage("plain")
	perPlayer := float64(total) / players
	t.Logf("without exactTop: %d bytes, %.1f bytes per player", total, perPlayer)
	if perPlayer > 150 {
		t.Errorf("%.1f bytes per player without exactTop, want at most 150", perPlayer)
	}

	const exactTop = 1000
	mustBoard(t, s, lb.Board{ID: "tail", ExactTop: exactTop})
	load(t, s, "tail", scores)
	total, index := usage("tail")
	perTail := float64(total-index) / (players - exactTop)
	t.Logf("exactTop %d: %d bytes (%d in the exact index), %.1f bytes per tail player", exactTop, total, index, perTail)
	if perTail > 80 {
		t.Errorf("%.1f bytes per tail player with exactTop, want at most 80", perTail)
	}
}
