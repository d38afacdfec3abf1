package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// readOp is one kind of read, in three forms: through the API (query with vars, new for every request), through
// the store's script, and the nearest plain sorted-set command (nil when there is none).
type readOp struct {
	name   string
	query  string
	vars   func() []byte
	script Op
	plain  Op
	// extra: a step the hot-path issue sets no target for (measured against the baseline all the same).
	extra bool
}

// The reads' queries (the reads and the shards scenarios): a board's top, a player's rank, the players around one.
const (
	rankQuery   = `query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { rank score topPercent } }`
	aroundQuery = `query($b: ID!, $p: ID!) { aroundMe(board: $b, playerId: $p, radius: 5) { playerId rank score } }`
)

func readTopQuery(first int) string {
	return `query($b: ID!) { top(board: $b, first: ` + strconv.Itoa(first) + `) { playerId rank score } }`
}

// svc is op through sv's API.
func (op readOp) svc(sv *service) Op {
	return func(ctx context.Context, w int, i int64) error {
		_, err := sv.hot.post(ctx, w, "", request(op.query, op.vars()))
		return err
	}
}

// runReads (issue scenario 3): top(first:10) (served from the server's per-process cache), top(first:100), rank,
// aroundMe(radius 5) (ids and scores; and with names and updatedAt) and friends(100 ids) on a board of ReadBoard players, over HTTP; the same reads through the
// scripts (Store.Top/Rank/Around/Friends); and plain ZREVRANGE / ZREVRANK on a sorted set of the same ids.
// With -baseline both servers run each read in alternating rounds, each on its own copy of the board.
func runReads(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	sz := e.sizes()
	n := sz.ReadBoard
	const board, zset = "big", "bench:zset:big"
	for _, sv := range e.svcs {
		if err := e.ensureBoardOn(ctx, sv, board, n, 0); err != nil {
			return nil, err
		}
	}
	if err := e.ensureZset(ctx, zset, n); err != nil {
		return nil, err
	}
	view := leaderboard.View{Board: board}
	boardVar := strconv.Quote(board)
	plainVars := func() []byte { return []byte(`{"b":` + boardVar + `}`) }
	playerVars := func() []byte {
		return []byte(`{"b":` + boardVar + `,"p":` + strconv.Quote(fixturePlayer(rand.IntN(n))) + `}`)
	}
	friendIDs := func() []string {
		ids := make([]string, 100)
		for k := range ids {
			ids[k] = fixturePlayer(rand.IntN(n))
		}
		return ids
	}
	top := func(first int) readOp {
		return readOp{
			name:  fmt.Sprintf("top(first:%d)", first),
			query: readTopQuery(first),
			vars:  plainVars,
			script: func(ctx context.Context, w int, i int64) error {
				p, err := e.store.Top(ctx, view, 0, first)
				if err == nil && len(p.Entries) != first {
					err = fmt.Errorf("top: %d entries", len(p.Entries))
				}
				return err
			},
			plain: func(ctx context.Context, w int, i int64) error {
				return e.rdb.ZRevRangeWithScores(ctx, zset, 0, int64(first-1)).Err()
			},
		}
	}
	ops := []readOp{top(10), top(100),
		{
			name:  "rank",
			query: rankQuery,
			vars:  playerVars,
			script: func(ctx context.Context, w int, i int64) error {
				en, err := e.store.Rank(ctx, view, fixturePlayer(rand.IntN(n)))
				if err == nil && en == nil {
					err = errors.New("rank: player missing")
				}
				return err
			},
			plain: func(ctx context.Context, w int, i int64) error {
				return e.rdb.ZRevRank(ctx, zset, fixturePlayer(rand.IntN(n))).Err()
			},
		},
		{
			name:  "aroundMe(radius:5)",
			query: aroundQuery,
			vars:  playerVars,
			script: func(ctx context.Context, w int, i int64) error {
				_, err := e.store.Around(ctx, view, fixturePlayer(rand.IntN(n)), 5)
				return err
			},
			// Without a script: two round trips (ZREVRANK, then ZREVRANGE around it).
			plain: func(ctx context.Context, w int, i int64) error {
				r, err := e.rdb.ZRevRank(ctx, zset, fixturePlayer(rand.IntN(n))).Result()
				if err != nil {
					return err
				}
				return e.rdb.ZRevRangeWithScores(ctx, zset, max(r-5, 0), r+5).Err()
			},
		},
		{
			// What a game client's list shows: names (the fixture's players have none: the names hash is read for
			// each row all the same, and answers none).
			name:  "aroundMe(radius:5), names",
			query: `query($b: ID!, $p: ID!) { aroundMe(board: $b, playerId: $p, radius: 5) { playerId displayName rank score } }`,
			vars:  playerVars,
			script: func(ctx context.Context, w int, i int64) error {
				_, err := e.store.Around(ctx, view, fixturePlayer(rand.IntN(n)), 5)
				return err
			},
			extra: true,
		},
		{
			name:  "friends(100 ids)",
			query: `query($b: ID!, $p: ID!, $f: [ID!]!) { friends(board: $b, playerId: $p, friendIds: $f) { playerId rank score } }`,
			vars: func() []byte {
				b := []byte(`{"b":` + boardVar + `,"p":` + strconv.Quote(fixturePlayer(rand.IntN(n))) + `,"f":[`)
				for k, id := range friendIDs() {
					if k > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendQuote(b, id)
				}
				return append(b, "]}"...)
			},
			script: func(ctx context.Context, w int, i int64) error {
				_, err := e.store.Friends(ctx, view, fixturePlayer(rand.IntN(n)), friendIDs())
				return err
			},
		},
	}

	title := fmt.Sprintf("3. Reads on a board of %d players, %d concurrent clients", n, sz.ReadClients)
	note := "Service: HTTP POST /graphql. Script: leaderboard.Store (one script call, FCALL, at a time per client, same " +
		"concurrency). Plain ZSET: ZREVRANGE … WITHSCORES / ZREVRANK on a sorted set of the same ids and scores " +
		"(aroundMe: ZREVRANK then ZREVRANGE, two round trips). top(first:10) and top(first:100) through the service " +
		"are answered from the server's per-process cache (Redis CPU per request 0)."
	var t *table
	var ct *cmpTable
	if e.baseline() {
		ct = e.cmpTable(title, "read", "req/s", "req", []string{"script", "plain"})
		t = ct.table
	} else {
		t = &table{title: title,
			head: []string{"read", "service req/s", "p50", "p99", "script req/s", "script p99", "plain ZSET req/s",
				"plain p99", "service/script", "service/plain", "server CPU", "CPU µs/req svc (server/redis/loadgen)", "errors"}}
	}
	t.notes = append(t.notes, note)
	cmds := commandTable(fmt.Sprintf("3b. Reads on a board of %d players: Redis's time per read by command", n),
		"read", "req")
	rate := func(s Sample) float64 { return s.Rate }
	for _, op := range ops {
		sv := make([][]Sample, len(e.svcs))
		var sc, pl, fl []Sample
		for r := 0; r < e.o.Runs; r++ {
			for _, k := range e.roundOrder(r) {
				s := e.svcs[k]
				if r == 0 && k == 0 {
					e.profileNext("reads-" + strings.NewReplacer("(", "-", ")", "", ":", "", " ", "-").Replace(op.name))
				}
				sv[k] = append(sv[k], e.stepOn(ctx, s, e.stepOf(sz.ReadClients), op.svc(s)))
			}
			sc = append(sc, e.stepOn(ctx, nil, e.stepOf(sz.ReadClients), op.script))
			if op.plain != nil {
				pl = append(pl, e.stepOn(ctx, nil, e.stepOf(sz.ReadClients), op.plain))
			}
			if e.floor != nil {
				f, err := e.floorSide(ctx, e.stepOf(sz.ReadClients), request(op.query, op.vars()), "", op.svc)
				if err != nil {
					return []*table{t, cmds}, err
				}
				fl = append(fl, f)
			}
		}
		for k, label := range e.sideLabels() {
			addCommandRow(cmds, op.name, label, sv[k], 1)
		}
		s, c := medianSample(sv[0]), medianSample(sc)
		if ct != nil {
			sides := e.withFloor([]side{{label: "script: Store (one FCALL)", short: "script", runs: sc},
				{label: "plain ZSET", short: "plain", runs: pl}}, fl)
			ct.add(op.name, sv[0], sv[1], sides, rate)
		} else {
			plainRate, plainP99, vsPlain := "-", "-", "-"
			if op.plain != nil {
				p := medianSample(pl)
				plainRate, plainP99 = fmtRate(p.Rate), fmtDur(p.P99)
				vsPlain = fmtRatio(medianRatio(sv[0], pl, rate))
				c = sumErrs(c, p)
			}
			t.add(op.name, fmtRate(s.Rate), fmtDur(s.P50), fmtDur(s.P99), fmtRate(c.Rate), fmtDur(c.P99), plainRate,
				plainP99, fmtRatio(medianRatio(sv[0], sc, rate)), vsPlain, fmtCores(s.CPU), cpuPerOp(s, true),
				fmtErrs(sumErrs(s, c)))
		}
		var v vsBase
		if ct != nil {
			v = compareBase(sv[0], sv[1], rate)
			v.ceiling = medianRatio(fl, sv[1], rate)
		}
		switch {
		case ct == nil && op.name == "top(first:10)":
			e.check("cached top(first:10)", "≥ 20,000 req/s", fmtRate(s.Rate)+" req/s", s.Rate >= 20_000 && s.Errs == 0)
		case ct != nil && op.name == "top(first:10)":
			e.checkSpeedup("cached top(first:10)", v, cachedTopSpeedup)
		case ct != nil && !strings.HasPrefix(op.name, "top(") && !op.extra:
			e.checkSpeedup(op.name, v, readSpeedup)
		}
	}
	return []*table{t, cmds}, nil
}
