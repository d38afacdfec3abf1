package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// fixtureScore is the score of fixture player i: spread over [0, 1,000,003) without order in i, the same
// distribution as the core's memory test.
func fixtureScore(i int) float64 { return float64((i * 7919) % 1_000_003) }

func fixturePlayer(i int) string { return "player-" + strconv.Itoa(i) }

// ensureBoard creates board id (ALL_TIME, DESC, BEST, the given exactTop) and loads it with fixture players up to
// n: player-0 .. player-(n-1). Loading is incremental, so growing 10k -> 100k -> 1M loads each player once. It
// goes through Store.SubmitMany in 1000-item calls from several goroutines: the real script, one round trip per
// call.
func (e *env) ensureBoard(ctx context.Context, id string, n, exactTop int) error {
	have, ok := e.loaded[id]
	if !ok {
		if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: id, ExactTop: exactTop}); err != nil {
			return fmt.Errorf("create board %q: %w", id, err)
		}
	}
	if have >= n {
		return nil
	}
	start := time.Now()
	if err := loadFixture(ctx, e.store, id, have, n, e.sizes().LoadWorkers); err != nil {
		return err
	}
	e.loaded[id] = n
	d := time.Since(start)
	e.logf("board %q: loaded players %d..%d in %s (%.0f scores/s)", id, have, n, d.Round(time.Millisecond),
		float64(n-have)/d.Seconds())
	return nil
}

// loadFixture writes fixture players from .. n-1 to board id through store.SubmitMany, in MaxBulk-item calls from
// workers goroutines: the real script, one call per round trip.
func loadFixture(ctx context.Context, store *leaderboard.Store, id string, from, n, workers int) error {
	const batch = leaderboard.MaxBulk
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs := make([]leaderboard.Submission, 0, batch)
			for ctx.Err() == nil {
				from := int(next.Add(batch)) - batch
				if from >= n {
					return
				}
				subs = subs[:0]
				for i := from; i < min(from+batch, n); i++ {
					subs = append(subs, leaderboard.Submission{Board: id, Player: fixturePlayer(i), Score: fixtureScore(i)})
				}
				out, err := store.SubmitMany(ctx, subs)
				if err == nil {
					for _, o := range out {
						if o.Err != nil {
							err = o.Err
							break
						}
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fmt.Errorf("load board %q: %w", id, firstErr)
	}
	return nil
}

// ensureZset loads the plain sorted set key with the same ids and scores as the fixture boards, up to n.
func (e *env) ensureZset(ctx context.Context, key string, n int) error {
	have := e.loaded["zset:"+key]
	if have >= n {
		return nil
	}
	const batch = 1000
	pipe := e.rdb.Pipeline()
	for from := have; from < n; from += batch {
		zs := make([]redis.Z, 0, batch)
		for i := from; i < min(from+batch, n); i++ {
			zs = append(zs, redis.Z{Score: fixtureScore(i), Member: fixturePlayer(i)})
		}
		pipe.ZAdd(ctx, key, zs...)
		if pipe.Len() == 50 || from+batch >= n {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("load sorted set %q: %w", key, err)
			}
		}
	}
	e.loaded["zset:"+key] = n
	return nil
}

// scanKeys returns the keys matching pattern.
func (e *env) scanKeys(ctx context.Context, pattern string) ([]string, error) {
	var keys []string
	iter := e.rdb.Scan(ctx, 0, pattern, 10_000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// memoryOf returns MEMORY USAGE of each key with SAMPLES 0 (exact: every element counted).
func (e *env) memoryOf(ctx context.Context, keys []string) ([]int64, error) {
	out := make([]int64, 0, len(keys))
	for from := 0; from < len(keys); from += 1000 {
		pipe := e.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, 0, 1000)
		for _, k := range keys[from:min(from+1000, len(keys))] {
			cmds = append(cmds, pipe.MemoryUsage(ctx, k, 0))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		for _, c := range cmds {
			out = append(out, c.Val())
		}
	}
	return out, nil
}

// createBoardOn creates board id (ALL_TIME, DESC, BEST, the given exactTop; 0: none) for sv: through env.store for
// the new server (its key format is this tree's), through sv's own API (createLeaderboard) for the baseline.
func (e *env) createBoardOn(ctx context.Context, sv *service, id string, exactTop int) error {
	if !sv.viaAPI {
		_, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: id, ExactTop: exactTop})
		return err
	}
	in := map[string]any{"id": id}
	if exactTop > 0 {
		in["exactTop"] = exactTop
	}
	_, err := sv.call(ctx, adminKey, `mutation($in: LeaderboardInput!) { createLeaderboard(input: $in) { id } }`,
		map[string]any{"in": in})
	if err != nil {
		return fmt.Errorf("%s server: create board %q: %w", sv.name, id, err)
	}
	return nil
}

// ensureBoardOn makes board id hold fixture players player-0 .. player-(n-1) for sv, and checks through sv's API
// that sv reads them: the new server's boards are loaded through env.store (ensureBoard, shared with the memory
// and growth scenarios), the baseline's through its own submitScores, since its key format may differ.
func (e *env) ensureBoardOn(ctx context.Context, sv *service, id string, n, exactTop int) error {
	var err error
	if sv.viaAPI {
		err = e.loadViaAPI(ctx, sv, id, n, exactTop)
	} else {
		err = e.ensureBoard(ctx, id, n, exactTop)
	}
	if err != nil {
		return err
	}
	return e.verifyBoard(ctx, sv, id, n)
}

// loadViaAPI is ensureBoard through sv's API: submitScores of 1000 items from LoadWorkers connections.
func (e *env) loadViaAPI(ctx context.Context, sv *service, id string, n, exactTop int) error {
	have, ok := sv.loaded[id]
	if !ok {
		if err := e.createBoardOn(ctx, sv, id, exactTop); err != nil {
			return err
		}
		sv.loaded[id] = 0
	}
	if have >= n {
		return nil
	}
	start := time.Now()
	const batch = 1000 // submitScores' limit at every revision
	h := newRawHTTP(sv.addr, "/graphql")
	defer h.closeAll()
	query := `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`
	var next atomic.Int64
	next.Store(int64(have))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for w := range e.sizes().LoadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vars := make([]byte, 0, 64*batch)
			for ctx.Err() == nil {
				from := int(next.Add(batch)) - batch
				if from >= n {
					return
				}
				vars = append(vars[:0], `{"in":[`...)
				for i := from; i < min(from+batch, n); i++ {
					if i > from {
						vars = append(vars, ',')
					}
					vars = scoreInput(vars, id, fixturePlayer(i), fixtureScore(i))
				}
				vars = append(vars, "]}"...)
				if _, err := h.post(ctx, w, submitKey, request(query, vars)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fmt.Errorf("%s server: load board %q: %w", sv.name, id, firstErr)
	}
	sv.loaded[id] = n
	d := time.Since(start)
	e.logf("%s server: board %q: loaded players %d..%d through its API in %s (%.0f scores/s)", sv.name, id, have, n,
		d.Round(time.Millisecond), float64(n-have)/d.Seconds())
	return nil
}

// verifyBoard checks through sv's API that board id holds n players and the last fixture player's score: the
// server reads the fixture that was written for it.
func (e *env) verifyBoard(ctx context.Context, sv *service, id string, n int) error {
	last := n - 1
	data, err := sv.call(ctx, "", `query($b: ID!, $p: ID!) { leaderboard(id: $b) { size } rank(board: $b, playerId: $p) { score } }`,
		map[string]any{"b": id, "p": fixturePlayer(last)})
	if err != nil {
		return fmt.Errorf("%s server: read board %q: %w", sv.name, id, err)
	}
	var r struct {
		Data struct {
			Leaderboard *struct{ Size int }
			Rank        *struct{ Score float64 }
		}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s server: read board %q: %w", sv.name, id, err)
	}
	switch {
	case r.Data.Leaderboard == nil:
		return fmt.Errorf("%s server does not see fixture board %q", sv.name, id)
	case r.Data.Leaderboard.Size != n:
		return fmt.Errorf("%s server: fixture board %q has %d players, want %d", sv.name, id, r.Data.Leaderboard.Size, n)
	case r.Data.Rank == nil || r.Data.Rank.Score != fixtureScore(last):
		return fmt.Errorf("%s server: fixture board %q: %s not read back with score %v", sv.name, id,
			fixturePlayer(last), fixtureScore(last))
	}
	return nil
}

// call sends one GraphQL request to sv on a connection of its own and returns the response body.
func (sv *service) call(ctx context.Context, key, query string, vars map[string]any) ([]byte, error) {
	v, err := json.Marshal(vars)
	if err != nil {
		return nil, err
	}
	h := newRawHTTP(sv.addr, "/graphql")
	defer h.closeAll()
	data, err := h.post(ctx, 0, key, request(query, v))
	return bytes.Clone(data), err
}
