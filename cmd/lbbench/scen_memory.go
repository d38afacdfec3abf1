package main

import (
	"context"
	"fmt"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// runMemory (issue scenario 4) measures Redis memory per player: MEMORY USAGE ... SAMPLES 0 over every key of an
// ALL_TIME board of n players (ids player-N, no metadata), without and with exactTop, next to a plain sorted set
// of the same ids and scores in the same Redis. Sizes are deterministic, so one run suffices.
func runMemory(ctx context.Context, e *env) ([]*table, error) {
	sz := e.sizes()
	t := &table{title: "4. Memory per player (MEMORY USAGE, SAMPLES 0, over every key of the board)",
		head: []string{"players", "board", "keys", "total", "bytes/player", "vs plain ZSET"}}
	t.notes = append(t.notes, fmt.Sprintf("exactTop board: exactTop %d; \"bytes/tail player\" = (all keys − the exact "+
		"sorted set) / (players − exactTop). Plain ZSET: ZADD of the same ids and scores.", sz.ExactTop))
	var plainPer, tailPer float64
	for _, n := range sz.MemorySizes {
		for _, id := range []string{"big", "big-exact"} {
			exact := 0
			if id == "big-exact" {
				exact = sz.ExactTop
			}
			if err := e.ensureBoard(ctx, id, n, exact); err != nil {
				return []*table{t}, err
			}
		}
		if err := e.ensureZset(ctx, "bench:zset:big", n); err != nil {
			return []*table{t}, err
		}
		zs, err := e.memoryOf(ctx, []string{"bench:zset:big"})
		if err != nil {
			return []*table{t}, err
		}
		zper := float64(zs[0]) / float64(n)

		total, keys, _, err := e.boardMemory(ctx, "big")
		if err != nil {
			return []*table{t}, err
		}
		per := float64(total) / float64(n)
		t.add(fmt.Sprint(n), "no exactTop", fmt.Sprint(keys), fmtBytes(total), fmt.Sprintf("%.1f", per),
			fmt.Sprintf("%.2f×", per/zper))

		total, keys, index, err := e.boardMemory(ctx, "big-exact")
		if err != nil {
			return []*table{t}, err
		}
		tail := float64(total-index) / float64(n-sz.ExactTop)
		t.add(fmt.Sprint(n), fmt.Sprintf("exactTop %d", sz.ExactTop), fmt.Sprint(keys), fmtBytes(total),
			fmt.Sprintf("%.1f (tail: %.1f)", float64(total)/float64(n), tail), fmt.Sprintf("%.2f×", tail/zper))
		t.add(fmt.Sprint(n), "plain ZSET", "1", fmtBytes(zs[0]), fmt.Sprintf("%.1f", zper), "1.00×")
		plainPer, tailPer = per, tail
		if n == 100_000 || e.o.Quick && n == sz.MemorySizes[len(sz.MemorySizes)-1] {
			e.check(fmt.Sprintf("memory per player, %d players, no exactTop", n), "≤ 150 B",
				fmt.Sprintf("%.1f B", plainPer), plainPer <= 150)
			e.check(fmt.Sprintf("memory per tail player, %d players, exactTop %d", n, sz.ExactTop), "≤ 80 B",
				fmt.Sprintf("%.1f B", tailPer), tailPer <= 80)
		}
	}
	return []*table{t}, nil
}

// boardMemory returns the bytes of every key of a board, how many keys it has, and the bytes of its exact
// sorted sets (keys "…}:z:…").
func (e *env) boardMemory(ctx context.Context, board string) (total int64, keys int, index int64, err error) {
	pattern := e.store.BoardKeys(board)
	ks, err := e.scanKeys(ctx, pattern)
	if err != nil {
		return 0, 0, 0, err
	}
	sizes, err := e.memoryOf(ctx, ks)
	if err != nil {
		return 0, 0, 0, err
	}
	for i, k := range ks {
		total += sizes[i]
		if leaderboard.IsRankingKey(k) {
			index += sizes[i]
		}
	}
	return total, len(ks), index, nil
}
