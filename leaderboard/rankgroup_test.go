package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// Concurrent rank and aroundMe reads that share plain reads (rankgroup.go) each get what ranks.lua or around.lua
// gives for that player alone (the oracle, read after them on the unchanged board): every field, players without
// a score, players asked by many reads at once, three views, four radii and every set of fields the plain reads
// take (and some they leave to the script); reads did go out together and aroundMe reads were answered plainly.
func TestGroupedRankReads(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return at }})
			for _, b := range []Board{{ID: "d", Windows: []Window{AllTime, Daily}}, {ID: "a", Order: Asc}} {
				if _, err := s.CreateBoard(ctx, b); err != nil {
					t.Fatal(err)
				}
				var subs []Submission
				for i := range 60 {
					sub := Submission{Board: b.ID, Player: fmt.Sprint("p", i), Score: float64(i / 4),
						AchievedAt: at.Add(-time.Duration(i) * time.Minute)}
					if i%5 == 0 {
						name := fmt.Sprint("P", i)
						sub.DisplayName, sub.Metadata = &name, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
					}
					subs = append(subs, sub)
				}
				if _, err := s.SubmitMany(ctx, subs); err != nil {
					t.Fatal(err)
				}
			}
			views := []View{{Board: "d"}, {Board: "d", Window: Daily}, {Board: "a"}}
			fields := []Fields{0, FieldUpdatedAt, FieldMeta, FieldUpdatedAt | FieldMeta}
			radii := []int{rankRead, 0, 2, rankRead, 5, MaxRadius}
			type read struct {
				v      View
				player string
				f      Fields
				radius int // rankRead: a rank read
			}
			const goroutines, each = 32, 30
			reads := make([][]read, goroutines)
			got := make([][][]Entry, goroutines)
			var wg sync.WaitGroup
			for g := range goroutines {
				for i := range each {
					r := read{views[(g+i)%len(views)], fmt.Sprint("p", (g*7+i*13)%64), fields[(g/3+i)%len(fields)],
						radii[(g/2+i/3)%len(radii)]}
					if r.radius != rankRead && r.f&FieldUpdatedAt != 0 {
						r.f = 0 // most aroundMe reads plain
					}
					if i%5 == 0 {
						r.player = "p7" // many reads of one player at once
					}
					reads[g] = append(reads[g], r) // p60..p63 have no score
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, r := range reads[g] {
						var es []Entry
						var err error
						if r.radius == rankRead {
							var e *Entry
							if e, err = s.Rank(ctx, r.v, r.player, Only(r.f)); e != nil {
								es = []Entry{*e}
							}
						} else {
							es, err = s.Around(ctx, r.v, r.player, r.radius, Only(r.f))
						}
						if err != nil {
							t.Error(err)
							return
						}
						got[g] = append(got[g], es)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			plain := s.plainReads.Load()
			for g := range goroutines {
				for i, r := range reads[g] {
					var p *Page
					var err error
					if r.radius == rankRead {
						p, err = s.read(ctx, r.v, ranksScript, int(r.f), r.player)
					} else {
						p, err = s.read(ctx, r.v, aroundScript, r.player, r.radius, int(r.f))
					}
					if err != nil {
						t.Fatal(err)
					}
					want := p.Entries
					if r.radius == rankRead && len(want) == 0 {
						want = nil
					}
					if !reflect.DeepEqual(got[g][i], want) {
						t.Fatalf("read %+v:\n%+v\nthe script:\n%+v", r, got[g][i], want)
					}
				}
			}
			if n := s.groups.shared.Load(); n == 0 {
				t.Errorf("no read shared a plain read with another (%d reads)", goroutines*each)
			}
			if plain == 0 || s.plainArounds.Load() == 0 {
				t.Errorf("reads answered plainly: %d, of them aroundMe: %d", plain, s.plainArounds.Load())
			}
		})
	}
}

// A rank or aroundMe read that shares a plain read still sees every write that ended before it began: each writer
// raises its own player's score and then reads its rank and the players around it, among readers of the same
// view, and must see the score it wrote.
func TestGroupedRankReadsAreFresh(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
			if _, err := s.CreateBoard(ctx, Board{ID: "f"}); err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				if _, err := s.Submit(ctx, Submission{Board: "f", Player: fmt.Sprint("r", i), Score: float64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			v := View{Board: "f"}
			stop := make(chan struct{})
			var readers, writers sync.WaitGroup
			for g := range 8 {
				readers.Add(1)
				go func() {
					defer readers.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						var err error
						if (g+i)%2 == 0 {
							_, err = s.Rank(ctx, v, fmt.Sprint("r", (g+i)%30), Only(0))
						} else {
							_, err = s.Around(ctx, v, fmt.Sprint("r", (g+i)%30), 2, Only(0))
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			for w := range 6 {
				writers.Add(1)
				go func() {
					defer writers.Done()
					player := fmt.Sprint("w", w)
					for n := 1; n <= 40; n++ {
						if _, err := s.Submit(ctx, Submission{Board: "f", Player: player, Score: float64(100 * n)}); err != nil {
							t.Error(err)
							return
						}
						e, err := s.Rank(ctx, v, player, Only(0))
						if err != nil || e == nil || e.Score != float64(100*n) {
							t.Errorf("%s after writing %d: %+v, %v", player, 100*n, e, err)
							return
						}
						es, err := s.Around(ctx, v, player, 2, Only(0))
						i := slices.IndexFunc(es, func(e Entry) bool { return e.PlayerID == player })
						if err != nil || i < 0 || es[i].Score != float64(100*n) {
							t.Errorf("%s after writing %d: around it %+v, %v", player, 100*n, es, err)
							return
						}
					}
				}()
			}
			writers.Wait()
			close(stop)
			readers.Wait()
			if n := s.groups.shared.Load(); n == 0 {
				t.Error("no read shared a plain read with another")
			}
		})
	}
}

// A grouped read is cut at its members' earliest deadline; a member with more time (or none) is not failed by
// another's: when the group's read ends past that deadline, it reads alone. The view is held busy by hand so that
// a read with a deadline already past and one without a deadline (a rank read and an aroundMe read of each kind)
// gather in one group, which then goes out past the first's deadline.
func TestGroupedReadsOutliveAnotherDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := scoredBoard(t, "d", 10)
	v := View{Board: "d"}
	for _, radius := range []int{rankRead, 2} {
		k := rankGroupKey{v.Board, string(v.Window), v.Period, 0, radius}
		s.groups.mu.Lock()
		s.groups.views[k] = nil // a read of the view in flight
		s.groups.mu.Unlock()
		read := func(ctx context.Context, player string) ([]Entry, error) {
			if radius == rankRead {
				e, err := s.Rank(ctx, v, player, Only(0))
				if e == nil {
					return nil, err
				}
				return []Entry{*e}, err
			}
			return s.Around(ctx, v, player, radius, Only(0))
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		errShort := make(chan error, 1)
		go func() {
			_, err := read(short, "p3")
			errShort <- err
		}()
		waitGroupSize(t, s, k, 1)
		type result struct {
			es  []Entry
			err error
		}
		long := make(chan result, 1)
		go func() {
			es, err := read(ctx, "p7")
			long <- result{es, err}
		}()
		waitGroupSize(t, s, k, 2)
		<-short.Done()
		// The read in flight ends: the gathered group goes out, past the short read's deadline.
		s.readGroup(ctx, k, v, &rankGroup{players: []string{"p0"}, ctx: ctx})
		if err := <-errShort; err == nil {
			t.Errorf("radius %d: a read past its deadline succeeded", radius)
		}
		got := <-long
		want, err := read(ctx, "p7")
		if err != nil {
			t.Fatal(err)
		}
		if got.err != nil || !reflect.DeepEqual(got.es, want) || len(want) == 0 {
			t.Fatalf("radius %d: the read without a deadline got %+v, %v; alone: %+v", radius, got.es, got.err, want)
		}
	}
}

// scoredBoard returns a store on Redis with board id of players p0..p(n-1), player pi scoring i.
func scoredBoard(t *testing.T, id string, n int) *Store {
	t.Helper()
	ctx := context.Background()
	s := New(redistest.Targets(t)[0].Client, Config{Prefix: redistest.Prefix(t)})
	if _, err := s.CreateBoard(ctx, Board{ID: id}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Submit(ctx, Submission{Board: id, Player: fmt.Sprint("p", i), Score: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// waitGroupSize waits until the next group of view k holds n reads.
func waitGroupSize(t *testing.T, s *Store, k rankGroupKey, n int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		s.groups.mu.Lock()
		g := s.groups.views[k]
		have := 0
		if g != nil {
			have = len(g.players)
		}
		s.groups.mu.Unlock()
		if have >= n {
			return
		}
	}
	t.Fatalf("the group of %+v never held %d reads", k, n)
}

// A group of aroundMe reads takes at most maxGroupedRows rows of windows (one transaction holds Redis while it
// runs): for every radius, the players a group takes times the rows each reads stay within it, and a read that
// finds the next group full reads alone at once, while the full group still waits (the view held busy by hand).
func TestGroupCapacity(t *testing.T) {
	t.Parallel()
	if c := (rankGroupKey{radius: rankRead}).capacity(); c != maxGroupedRanks {
		t.Fatalf("rank reads: %d a group", c)
	}
	// The README's figures: 2,048 rows, 128 reads of radius 5, 9 of radius 100.
	if maxGroupedRows != 2048 || (rankGroupKey{radius: 5}).capacity() != 128 || (rankGroupKey{radius: 100}).capacity() != 9 {
		t.Fatalf("%d rows a group: %d reads of radius 5, %d of radius 100", maxGroupedRows,
			rankGroupKey{radius: 5}.capacity(), rankGroupKey{radius: 100}.capacity())
	}
	// Names and updatedAt: a row counts once more for each (at radius 5: 15 rows a read, 30 with one, 45 with both).
	for arg, want := range map[Fields]int{FieldUpdatedAt: 68, FieldMeta: 68, FieldUpdatedAt | FieldMeta: 45} {
		if c := (rankGroupKey{arg: int(arg), radius: 5}).capacity(); c != want {
			t.Fatalf("fields %b: %d reads of radius 5 a group, want %d", arg, c, want)
		}
	}
	for radius := 0; radius <= MaxRadius; radius++ {
		for _, f := range []Fields{0, FieldUpdatedAt, FieldMeta, FieldUpdatedAt | FieldMeta} {
			per := 2*radius + 1 + 2*aroundMargin
			if f&FieldUpdatedAt != 0 {
				per *= 2
			}
			if f&FieldMeta != 0 {
				per += 2*radius + 1 + 2*aroundMargin
			}
			c := rankGroupKey{arg: int(f), radius: radius}.capacity()
			if c < 1 || c > maxGroupedRanks || c > 1 && c*per > maxGroupedRows {
				t.Fatalf("radius %d fields %b: %d a group", radius, f, c)
			}
		}
	}
	ctx := context.Background()
	s := scoredBoard(t, "c", 300)
	v := View{Board: "c"}
	k := rankGroupKey{v.Board, string(v.Window), v.Period, 0, MaxRadius}
	s.groups.mu.Lock()
	s.groups.views[k] = nil // a read of the view in flight
	s.groups.mu.Unlock()
	full := k.capacity()
	results := make(chan error, full)
	for i := range full {
		go func() {
			_, err := s.Around(ctx, v, fmt.Sprint("p", i), MaxRadius, Only(0))
			results <- err
		}()
	}
	waitGroupSize(t, s, k, full)
	alone := make(chan error, 1)
	go func() {
		es, err := s.Around(ctx, v, "p150", MaxRadius, Only(0)) // the group is full: alone, now
		if err == nil && len(es) != 2*MaxRadius+1 {
			err = fmt.Errorf("%d entries", len(es))
		}
		alone <- err
	}()
	select {
	case err := <-alone:
		if err != nil {
			t.Errorf("the read past a full group: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the read past a full group of %d waited for it", full)
	}
	s.readGroup(ctx, k, v, &rankGroup{players: []string{"p0"}, ctx: ctx})
	for range full {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
}
