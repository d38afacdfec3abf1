package leaderboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// The plain aroundMe read (aroundplain.go) answers exactly what around.lua answers for each player, read right
// after on the same data (the oracle): every field of every entry, on boards of both orders and every mode (ties
// among them), a daily window's current period and an empty past one, players at the top and bottom edges,
// players without a score and ids given twice, radii from 0 to MaxRadius (a window larger than the board), and
// every set of fields; the reads it must leave to the script (tie ranks, an exactTop board)
// are compared too, and the count of plain answers shows which were plain. On Redis, the cluster and the
// embedded store.
func TestAroundPlainMatchesScript(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tg := range plainTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s, boards := plainBoards(t, tg.Client, at)
			rnd := rand.New(rand.NewPCG(3, 4))
			for _, nb := range boards {
				top, err := s.Top(ctx, View{Board: nb.ID}, 0, 40)
				if err != nil {
					t.Fatal(err)
				}
				edges := []string{top.Entries[0].PlayerID, top.Entries[1].PlayerID, top.Entries[len(top.Entries)-1].PlayerID,
					top.Entries[len(top.Entries)-2].PlayerID}
				for _, v := range plainViews(nb, at) {
					for k := range 8 {
						// The embedded store runs the scripts in Go's Lua, slowly under the race detector: five of
						// the eight reads there (k 0, 2, 3, 4 and 6: every radius, the edges once).
						if tg.Name == "embedded" && (k == 1 || k == 5 || k == 7) {
							continue
						}
						ids := make([]string, 2+rnd.IntN(12))
						for j := range ids {
							ids[j] = fmt.Sprint("p", rnd.IntN(46)) // p40..p45 have no score
						}
						if k < 2 {
							ids = append(ids, edges...)
						}
						ids = append(ids, ids[0]) // one id twice
						radius := []int{0, 1, 5, 19, MaxRadius}[k%5]
						for _, opts := range [][]ReadOption{{Only(0)}, {Only(FieldPreviousRank)}, {Only(FieldUpdatedAt)},
							{Only(FieldMeta)}, {Only(FieldUpdatedAt | FieldMeta)}, {Only(FieldTieRank)}, nil} {
							arg := readArg(opts) & int(FieldUpdatedAt|FieldTieRank|FieldMeta)
							plain := s.plainArounds.Load()
							got, err := s.aroundMany(ctx, v, ids, radius, arg)
							if err != nil {
								t.Fatal(err)
							}
							distinct := len(slices.Compact(slices.Sorted(slices.Values(ids))))
							answered := s.plainArounds.Load() - plain
							// A lone player is read by the script (alone, the plain read saves nothing).
							want := 0
							if plainAroundFit(nb, arg) && distinct > 1 {
								want = distinct
							}
							if answered != int64(want) {
								t.Fatalf("%s %v fields %b: %d answered plainly, want %d", nb.ID, v, arg, answered, want)
							}
							if len(got) != distinct {
								t.Fatalf("%s %v: %d players answered, want %d", nb.ID, v, len(got), distinct)
							}
							for _, id := range ids {
								want, err := s.read(ctx, v, aroundScript, id, radius, arg)
								if err != nil {
									t.Fatal(err)
								}
								if !reflect.DeepEqual(got[id], want.Entries) {
									t.Fatalf("%s %v %s radius %d fields %b:\nplain  %+v\nscript %+v", nb.ID, v, id, radius,
										arg, got[id], want.Entries)
								}
							}
						}
					}
				}
			}
		})
	}
}

// A plain aroundMe read is one moment of the board for each player however the board moves between its round
// trips: while writers raise scores and add players, every player's window holds consecutive ranks in score
// order, the player included at the place around.lua's rule gives for its rank among the board's size, with as
// many entries as that rule gives; where names and updatedAt are asked, each entry's are the ones its score was
// submitted with (every submission names the player after its score and dates it by it). Reads were answered
// plainly, and some were read again after a snapshot did not prove them (both counted).
func TestAroundPlainSnapshot(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return at }})
			if _, err := s.CreateBoard(ctx, Board{ID: "b"}); err != nil {
				t.Fatal(err)
			}
			submit := func(id string, x int) error {
				name := fmt.Sprint("n", x)
				_, err := s.Submit(ctx, Submission{Board: "b", Player: id, Score: float64(x), DisplayName: &name,
					AchievedAt: scoreTime(at, float64(x))})
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
			const readers, reads, radius = 2, 150, 3
			stopWriters := raiseScores(t, pool, time.Millisecond, func(id string, x int) error { return submit(id, 60+x) })
			var rg sync.WaitGroup
			var answered atomic.Int64
			for r := range readers {
				rg.Add(1)
				go func() {
					defer rg.Done()
					for k := range reads {
						ids := make([]string, 12)
						for j := range ids {
							ids[j] = pool[(k*13+j*11+r*5)%len(pool)]
						}
						rv, err := s.Resolve(ctx, View{Board: "b"})
						if err != nil {
							t.Error(err)
							return
						}
						arg := []Fields{0, FieldMeta, FieldUpdatedAt, FieldUpdatedAt | FieldMeta}[k%4]
						replies, _, err := s.aroundPlain(ctx, rv, ids, radius, int(arg))
						if err != nil {
							t.Error(err)
							return
						}
						for id, reply := range replies {
							p, err := s.pageOf(rv, reply)
							if err != nil {
								t.Error(err)
								return
							}
							if msg := aroundFault(p, id, radius); msg != "" {
								t.Errorf("read %d of %s: %s", k, id, msg)
								return
							}
							if msg := aroundFieldsFault(p, arg, at); msg != "" {
								t.Errorf("read %d of %s, fields %b: %s", k, id, arg, msg)
								return
							}
						}
						answered.Add(int64(len(replies)))
					}
				}()
			}
			rg.Wait()
			stopWriters()
			plain, retries := answered.Load(), s.plainRetries.Load()
			t.Logf("%d of %d players read plainly, %d snapshots taken again", plain, readers*reads*12, retries)
			if plain < readers*reads*12/10 || retries == 0 {
				t.Errorf("%d of %d players read plainly, %d snapshots taken again: want a tenth of them plain, and "+
					"some again", plain, readers*reads*12, retries)
			}
		})
	}
}

// aroundFault says what in a player's aroundMe page no single moment of a board (descending, exact) could give
// ("" if nothing).
func aroundFault(p *Page, player string, radius int) string {
	es := p.Entries
	i := slices.IndexFunc(es, func(e Entry) bool { return e.PlayerID == player })
	if len(es) == 0 {
		return "" // no score (yet)
	}
	if i < 0 {
		return fmt.Sprintf("not in its window %v", idsOfEntries(es))
	}
	start, stop := aroundWindow(es[i].Rank-1, p.Size, radius)
	if int64(len(es)) != stop-start+1 || es[0].Rank != start+1 {
		return fmt.Sprintf("rank %d of %d: window of ranks %v, want %d..%d", es[i].Rank, p.Size, ranksOfEntries(es),
			start+1, stop+1)
	}
	seen := map[string]bool{}
	for k, e := range es {
		if e.Rank != start+1+int64(k) || e.Approximate || seen[e.PlayerID] {
			return fmt.Sprintf("entries %v ranks %v", idsOfEntries(es), ranksOfEntries(es))
		}
		seen[e.PlayerID] = true
		if k > 0 && e.Score > es[k-1].Score {
			return fmt.Sprintf("rank %d scores %g after %g", e.Rank, e.Score, es[k-1].Score)
		}
	}
	return ""
}

// scoreTime is when TestAroundPlainSnapshot's writers say score x was achieved: x seconds before the clock at.
func scoreTime(at time.Time, x float64) time.Time {
	return at.Add(-time.Duration(x) * time.Second)
}

// aroundFieldsFault says which entry of a page read with fields arg does not carry the name and updatedAt its
// score was submitted with in TestAroundPlainSnapshot ("" if none), and which carries a field not asked for.
func aroundFieldsFault(p *Page, arg Fields, at time.Time) string {
	for _, e := range p.Entries {
		name := ""
		if e.DisplayName != nil {
			name = *e.DisplayName
		}
		wantName, wantTs := "", time.Time{}
		if arg&FieldMeta != 0 {
			wantName = fmt.Sprint("n", e.Score)
		}
		if arg&FieldUpdatedAt != 0 {
			wantTs = scoreTime(at, e.Score)
		}
		if name != wantName || !e.UpdatedAt.Equal(wantTs) {
			return fmt.Sprintf("%s score %g: name %q updatedAt %v, want %q and %v", e.PlayerID, e.Score, name,
				e.UpdatedAt, wantName, wantTs)
		}
	}
	return ""
}

func idsOfEntries(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.PlayerID
	}
	return out
}

// A Redis error reply in a plain aroundMe read (keys of the wrong type, as a foreign writer could leave them)
// leaves the players to the script, and the caller gets the script's answer: the same error code, no panic. A
// board whose definition went away under a store that still holds it is NOT_FOUND. A broken names hash fails
// only the reads that select names (and updatedAt with them).
func TestAroundPlainLeavesErrorsToTheScript(t *testing.T) {
	t.Parallel()
	names := int(FieldMeta | FieldUpdatedAt)
	for _, c := range []struct {
		kind string
		arg  int
	}{{"s", 0}, {"z", 0}, {"r", 0}, {"def", 0}, {"s", names}, {"z", names}, {"r", names}, {"m", names}} {
		t.Run(fmt.Sprint(c.kind, "/", c.arg), func(t *testing.T) {
			ctx := context.Background()
			s := brokenBoard(t, c.kind)
			v := View{Board: "w"}
			plain := s.plainArounds.Load()
			_, err := s.aroundMany(ctx, v, []string{"p0", "p1", "p2"}, 1, c.arg)
			if s.plainArounds.Load() != plain {
				t.Fatalf("a plain read answered on a broken board: %v", err)
			}
			if c.kind == "def" {
				if ErrorCode(err) != NotFound || !strings.Contains(err.Error(), "this id") {
					t.Fatalf("plain read of a board gone: %v", err)
				}
				if _, err := s.Board(ctx, "w"); ErrorCode(err) != NotFound {
					t.Fatalf("the store still holds the board gone: %v", err)
				}
				return
			}
			_, want := s.read(ctx, v, aroundScript, "p0", 1, c.arg)
			if want == nil || ErrorCode(err) != ErrorCode(want) {
				t.Fatalf("plain read: %v; the script: %v", err, want)
			}
		})
	}
}

// aroundWindowHarness runs around.lua's window (around_window) for every rank of boards of 1 to ARGV[1] players
// and radii 0 to ARGV[2], in that order, and returns start and stop of each.
var aroundWindowHarness = redis.NewScript(commonLua + prologue + `
local out = {}
for n = 1, tonumber(ARGV[1]) do
  for radius = 0, tonumber(ARGV[2]) do
    for r = 0, n - 1 do
      local start, stop = around_window(r, n, radius)
      out[#out + 1] = start
      out[#out + 1] = stop
    end
  end
end
return out
`)

// aroundWindow is the aroundMe rule, checked on every rank of boards of 1 to 12 players for radii 0 to 7 against
// the rule as the API states it: 2·radius+1 consecutive entries (all of them on a smaller board), the player's
// among them, as centred as the edges allow; and around.lua's around_window gives the same windows, on Redis.
func TestAroundWindow(t *testing.T) {
	if aroundMargin != 2 { // the README says two rows to spare on either side
		t.Fatalf("aroundMargin %d; the README says 2", aroundMargin)
	}
	const boards, radii = 12, 7
	lua, err := aroundWindowHarness.Run(context.Background(), redistest.SharedStandalone(t).Client(t),
		declared([]string{"t:{x}:"}), boards, radii).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= boards; n++ {
		for radius := 0; radius <= radii; radius++ {
			for r := int64(0); r < n; r++ {
				start, stop := aroundWindow(r, n, radius)
				if len(lua) < 2 || lua[0] != start || lua[1] != stop {
					t.Fatalf("rank %d of %d, radius %d: aroundWindow %d..%d, around_window %v", r, n, radius, start,
						stop, lua[:min(2, len(lua))])
				}
				lua = lua[2:]
				size := min(n, int64(2*radius+1))
				if stop-start+1 != size || start < 0 || stop > n-1 || r < start || r > stop {
					t.Fatalf("rank %d of %d, radius %d: %d..%d", r, n, radius, start, stop)
				}
				// Centred: as many above as below, unless an edge cuts one side short.
				above, below := r-start, stop-r
				if above != below && !(start == 0 && above < int64(radius)) && !(stop == n-1 && below < int64(radius)) {
					t.Fatalf("rank %d of %d, radius %d: %d above, %d below", r, n, radius, above, below)
				}
			}
		}
	}
}
