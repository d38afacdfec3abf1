package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// The plain read (ranksplain.go) answers exactly what ranks.lua answers, read right after on the same data (the
// oracle): every field of every entry, the size and the version, on boards of both orders and every mode, a
// daily window's current period and an empty past one, players with names and metadata, ids without a score and
// ids given twice, and every set of fields. Reads it must leave to the script (tie ranks, an exactTop board) are
// compared too, and the count of plain answers shows which were plain. On Redis, the cluster and the embedded
// store.
func TestRanksPlainMatchesScript(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tg := range plainTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s, boards := plainBoards(t, tg.Client, at)
			rnd := rand.New(rand.NewPCG(1, 2))
			for _, nb := range boards {
				for _, v := range plainViews(nb, at) {
					for k := range 12 {
						ids := make([]string, rnd.IntN(30))
						for j := range ids {
							ids[j] = fmt.Sprint("p", rnd.IntN(46)) // p40..p45 have no score
						}
						if k == 0 {
							ids = nil
						}
						for _, opts := range [][]ReadOption{{Only(0)}, {Only(FieldUpdatedAt)}, {Only(FieldMeta)},
							{Only(FieldUpdatedAt | FieldMeta)}, {Only(0), WithVersion()}, {WithVersion()},
							{Only(FieldTieRank)}, nil} {
							plain := s.plainReads.Load()
							got, err := s.Ranks(ctx, v, ids, opts...)
							if err != nil {
								t.Fatal(err)
							}
							arg := readArg(opts)
							answered := s.plainReads.Load() > plain
							if fits := plainRanksFit(nb, arg); answered != fits {
								t.Fatalf("%s %v fields %b: answered plainly %v, want %v", nb.ID, v, arg, answered, fits)
							}
							args := []any{arg}
							for _, id := range ids {
								args = append(args, id)
							}
							want, err := s.read(ctx, v, ranksScript, args...)
							if err != nil {
								t.Fatal(err)
							}
							if !reflect.DeepEqual(got, want) {
								t.Fatalf("%s %v %v fields %b:\nplain  %+v\nscript %+v", nb.ID, v, ids, arg, got, want)
							}
						}
					}
				}
			}
		})
	}
}

// plainTargets are the stores the plain reads are held to the scripts on: Redis, the cluster and the embedded one.
func plainTargets(t *testing.T) []redistest.Target {
	m := miniredis.RunT(t)
	emb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { emb.Close() })
	return append(redistest.Targets(t), redistest.Target{Name: "embedded", Client: emb})
}

// plainViews are the views of b the plain reads are held to the scripts on: its first window, and a daily window's
// current period and an empty one three days before the clock at.
func plainViews(b *Board, at time.Time) []View {
	views := []View{{Board: b.ID}}
	if b.HasWindow(Daily) {
		views = append(views, View{Board: b.ID, Window: Daily},
			View{Board: b.ID, Window: Daily, Period: b.Period(Daily, at.AddDate(0, 0, -3))})
	}
	return views
}

// plainBoards makes a store on c at the clock at with the five kinds of board the plain reads are held to the
// scripts on (both orders, every mode, a daily window, an exactTop board), each with players p0..p39 submitted one to
// three times (scores 0..11, so ties; names and metadata on every third), and returns the boards as created.
func plainBoards(t *testing.T, c redis.UniversalClient, at time.Time) (*Store, []*Board) {
	t.Helper()
	ctx := context.Background()
	s := New(c, Config{Prefix: redistest.Prefix(t), PublishCommand: PublishPlain, Clock: func() time.Time { return at }})
	rnd := rand.New(rand.NewPCG(1, 2))
	var out []*Board
	for _, b := range []Board{{ID: "desc", Windows: []Window{AllTime, Daily}}, {ID: "asc", Order: Asc},
		{ID: "sum", Mode: Sum}, {ID: "latest", Mode: Latest}, {ID: "tail", ExactTop: 5}} {
		nb, err := s.CreateBoard(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, nb)
		for i := range 40 {
			for range 1 + rnd.IntN(3) {
				sub := Submission{Board: b.ID, Player: fmt.Sprint("p", i), Score: float64(rnd.IntN(12)),
					AchievedAt: at.Add(-time.Duration(rnd.IntN(7*3600)) * time.Second)}
				if i%3 == 0 {
					name := fmt.Sprint("Player ", i)
					sub.DisplayName = &name
					sub.Metadata = json.RawMessage(fmt.Sprintf(`{"level":%d}`, i))
				}
				if _, err := s.Submit(ctx, sub); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return s, out
}

// A plain read is one moment of the board however it moves between the read's round trips: while writers raise
// scores and add players, every read of the whole pool has as many entries as the board has players, ranked 1 to
// that size, scores in rank order, each with the updatedAt its score was submitted with. Reads were answered
// plainly, and some took another snapshot after the first did not prove its records (both counted).
func TestRanksPlainSnapshot(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return at }})
			if _, err := s.CreateBoard(ctx, Board{ID: "b"}); err != nil {
				t.Fatal(err)
			}
			// Score x is achieved at base + x seconds, so a read's updatedAt tells which score its record holds.
			base := at.Add(-24 * time.Hour)
			submit := func(id string, x int) error {
				_, err := s.Submit(ctx, Submission{Board: "b", Player: id, Score: float64(x),
					AchievedAt: base.Add(time.Duration(x) * time.Second)})
				return err
			}
			pool := make([]string, 150)
			for i := range pool {
				pool[i] = fmt.Sprint("p", i)
				if i < 60 {
					if err := submit(pool[i], i); err != nil {
						t.Fatal(err)
					}
				}
			}
			const readers, reads = 2, 150
			stopWriters := raiseScores(t, pool, 2*time.Millisecond, func(id string, x int) error { return submit(id, 100+x) })
			var rg sync.WaitGroup
			for r := range readers {
				rg.Add(1)
				go func() {
					defer rg.Done()
					for k := range reads {
						f := Fields(0)
						if (k+r)%2 == 0 {
							f = FieldUpdatedAt
						}
						p, err := s.Ranks(ctx, View{Board: "b"}, pool, Only(f))
						if err != nil {
							t.Error(err)
							return
						}
						if msg := snapshotFault(p, f, base); msg != "" {
							t.Errorf("read %d: %s", k, msg)
							return
						}
					}
				}()
			}
			rg.Wait()
			stopWriters()
			plain, retries := s.plainReads.Load(), s.plainRetries.Load()
			t.Logf("%d of %d reads plain, %d snapshots taken again", plain, readers*reads, retries)
			// Both paths taken: plain answers (a read retries when a write lands between its round trips, and
			// after plainRanksTries goes to the script; on a slow machine more of them do) and retries.
			if plain < readers*reads/10 || retries == 0 {
				t.Errorf("%d of %d reads plain, %d snapshots taken again: want a tenth of them plain, and some again",
					plain, readers*reads, retries)
			}
		})
	}
}

// raiseScores starts three writers that raise the scores of the players of pool (each writer its own third), one
// submission (submit(id, score)) every interval each, scores rising by 1 to 5 from 1 (BEST boards keep them), until
// the returned stop is called, which waits for them.
func raiseScores(t *testing.T, pool []string, interval time.Duration, submit func(id string, x int) error) (stop func()) {
	const writers = 3
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			score := map[string]int{}
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				case <-time.After(interval): // a busy board, not a write-only one
				}
				id := pool[w+writers*((n*7)%(len(pool)/writers))] // this writer's players only
				score[id] += 1 + n%5                              // scores only rise (BEST)
				if err := submit(id, score[id]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// snapshotFault says what in a read of a whole pool no single moment of the board could give ("" if nothing).
func snapshotFault(p *Page, f Fields, base time.Time) string {
	es := slices.Clone(p.Entries)
	if int64(len(es)) != p.Size {
		return fmt.Sprintf("%d entries, size %d", len(es), p.Size)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Rank < es[j].Rank })
	for i, e := range es {
		if e.Rank != int64(i+1) || e.Approximate {
			return fmt.Sprintf("ranks %v", ranksOfEntries(es))
		}
		if i > 0 && e.Score > es[i-1].Score {
			return fmt.Sprintf("rank %d scores %g after %g", e.Rank, e.Score, es[i-1].Score)
		}
		want := time.Time{}
		if f&FieldUpdatedAt != 0 {
			want = base.Add(time.Duration(e.Score) * time.Second).UTC()
		}
		if !e.UpdatedAt.Equal(want) {
			return fmt.Sprintf("%s: score %g, updatedAt %v, want %v", e.PlayerID, e.Score, e.UpdatedAt, want)
		}
	}
	return ""
}

func ranksOfEntries(es []Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Rank
	}
	return out
}

// A Redis error reply in a plain read (here keys of the wrong type, as a foreign writer could leave them) leaves
// the read to the script, and the caller gets the script's answer: the same error code, no panic. A board whose
// definition went away under a store that still holds it ("def") is NOT_FOUND on both paths.
func TestRanksPlainLeavesErrorsToTheScript(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"s", "z", "r", "def"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := brokenBoard(t, kind)
			v := View{Board: "w"}
			plain := s.plainReads.Load()
			_, err := s.Ranks(ctx, v, []string{"p0", "p1", "p2"}, Only(0))
			if kind == "def" {
				// The store held the board: the plain read ran and found the definition gone.
				// (loadBoard's message names the id; the scripts' and the plain read's say "this id")
				if ErrorCode(err) != NotFound || !strings.Contains(err.Error(), "this id") || s.plainReads.Load() != plain {
					t.Fatalf("plain read of a board gone: %v", err)
				}
				if _, err := s.Board(ctx, "w"); ErrorCode(err) != NotFound {
					t.Fatalf("the store still holds the board gone: %v", err)
				}
				return
			}
			_, want := s.read(ctx, v, ranksScript, 0, "p0", "p1", "p2")
			if want == nil || ErrorCode(err) != ErrorCode(want) {
				t.Fatalf("plain read: %v; the script: %v", err, want)
			}
		})
	}
}

// brokenBoard returns a store holding board "w" (players p0, p1, p2) whose all-time period's state ("s"), sorted
// set ("z") or first record hash ("r") a foreign writer replaced with a string, or whose definition ("def") went away
// after the store loaded it.
func brokenBoard(t *testing.T, kind string) *Store {
	t.Helper()
	ctx := context.Background()
	tg := redistest.Targets(t)[0]
	s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
	if _, err := s.CreateBoard(ctx, Board{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Submit(ctx, Submission{Board: "w", Player: fmt.Sprint("p", i), Score: 1}); err != nil {
			t.Fatal(err)
		}
	}
	base := s.keyBase("w")
	key := map[string]string{"s": keyState.at(base, AllTime, AllPeriod), "z": keyRanking.at(base, AllTime, AllPeriod),
		"r": keyRecords.atN(base, AllTime, AllPeriod, 0), "def": keyDef.of(base), "m": keyNames.of(base)}[kind]
	if err := tg.Client.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if kind != "def" {
		if err := tg.Client.Set(ctx, key, "not a hash or a sorted set", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// The remembered record layouts stay bounded however many periods are read: at plainRanksLayouts a new one
// empties them, and a known one is updated in place.
func TestRecordLayoutsBounded(t *testing.T) {
	var c recordLayouts
	for i := range 3 * plainRanksLayouts {
		c.set(fmt.Sprint("p", i), recordLayout{lvl: i % 7, hv: 2})
		if len(c.m) > plainRanksLayouts {
			t.Fatalf("%d layouts after %d periods", len(c.m), i+1)
		}
	}
	last := fmt.Sprint("p", 3*plainRanksLayouts-1)
	c.set(last, recordLayout{lvl: 9, sp: 3, hv: 1})
	if l, ok := c.get(last); !ok || l != (recordLayout{lvl: 9, sp: 3, hv: 1}) {
		t.Fatalf("%s: %+v %v", last, l, ok)
	}
}
