package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// A failover of one shard's primary to a replica that lagged: that shard of a sharded board is some writes behind
// the others (shard 0, which holds the board-wide arrival counter, or another). The board catches up and then,
// with more writes, answers as a twin that lost nothing: every field, ties by first arrival.
func TestLedgerOneShardLagging(t *testing.T) {
	t.Parallel()
	for _, lagging := range []int{0, 1} {
		t.Run(fmt.Sprintf("shard%d", lagging), func(t *testing.T) {
			t.Parallel()
			clock := &closeClock{t: ledgerStart}
			cfg := ledgerConfig(t, clock)
			cfg.LedgerCheckInterval = 50 * time.Millisecond
			s := startServer(t, cfg)
			boards := []string{"lg", "lg-twin"}
			for _, b := range boards {
				s.create(t, map[string]any{"id": b, "shards": 3, "mode": "LATEST", "windows": []string{"ALL_TIME", "DAILY"}})
			}
			step := 0
			submit := func(p string, v float64) {
				step++
				clock.Set(ledgerStart.Add(time.Duration(step) * time.Second))
				for _, b := range boards {
					in := map[string]any{"board": b, "playerId": p, "score": v, "eventId": fmt.Sprintf("e%d", step),
						"displayName": fmt.Sprintf("N%d", step)}
					s.doAvailableAs(t, testSubmitKey, submitMutation, map[string]any{"in": in})
				}
			}
			for i := range 15 {
				submit(fmt.Sprintf("p%d", i%10), float64(i%3))
			}
			base := s.Store.ShardKeyBases(&leaderboard.Board{ID: "lg", Shards: 3})[lagging]
			snap := boardSnapshot{}
			for k, v := range snapshotBoard(t, s, "lg", 3) {
				if strings.HasPrefix(k, base) {
					snap[k] = v
				}
			}
			for i := 15; i < 30; i++ {
				submit(fmt.Sprintf("p%d", i%10), float64(i%3))
			}
			// That shard alone goes back to what the replica had.
			c := redisClient(t, s)
			_, err := c.TxPipelined(ctxT(t, 5*time.Second), func(p redis.Pipeliner) error {
				for _, k := range shardKeys(t, s, "lg", 3) {
					if strings.HasPrefix(k, base) {
						p.Del(ctxT(t, 5*time.Second), k)
					}
				}
				for k, v := range snap {
					p.RestoreReplace(ctxT(t, 5*time.Second), k, v.ttl, v.dump)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 30; i < 45; i++ {
				submit(fmt.Sprintf("p%d", i%12), float64(i%3))
			}
			const read = `query($b: ID!) { top(board: $b, first: 50) { playerId displayName rank tieRank score updatedAt }
				d: top(board: $b, window: DAILY, first: 50) { playerId rank tieRank score }
				leaderboard(id: $b) { size } }`
			want := s.do(t, "", read, map[string]any{"b": "lg-twin"})
			var got gqlResponse
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if got = s.do(t, "", read, map[string]any{"b": "lg"}); string(got.Data) == string(want.Data) {
					break
				}
			}
			if string(got.Data) != string(want.Data) {
				t.Fatalf("after shard %d lagged:\n%s %+v\nthe twin:\n%s", lagging, firstDiff(string(got.Data), string(want.Data)),
					got.Errors, firstDiff(string(want.Data), string(got.Data)))
			}
		})
	}
}
