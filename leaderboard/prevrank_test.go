package leaderboard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// rankModel is the oracle of TestPreviousRankOnlyWhenAsked: a board's players with their scores and arrival
// numbers, ranked by brute force (better score first, then earlier arrival).
type rankModel struct {
	desc    bool
	mode    lb.Mode
	score   map[string]float64
	arrival map[string]int
	seq     int
}

func (m *rankModel) rank(id string) int64 {
	s, ok := m.score[id]
	if !ok {
		return 0
	}
	a := m.arrival[id]
	r := int64(1)
	for p, x := range m.score {
		if p == id {
			continue
		}
		better := x < s
		if m.desc {
			better = x > s
		}
		if better || x == s && m.arrival[p] < a {
			r++
		}
	}
	return r
}

// submit applies one submission and returns the player's rank before (0: none) and after, and whether it changed.
func (m *rankModel) submit(id string, x float64) (prev, rank int64, changed bool) {
	prev = m.rank(id)
	old, had := m.score[id]
	switch {
	case !had:
		changed = true
	case m.mode == lb.Latest:
		changed = x != old
	default:
		changed = x > old == m.desc && x != old
	}
	if changed {
		m.seq++
		m.score[id], m.arrival[id] = x, m.seq
	}
	return prev, m.rank(id), changed
}

// A submission asked for its previous rank gets it exactly; one not asked for it (Only without
// FieldPreviousRank) may come without it only when the player ranked below LiveTop before and after, and then
// Redis does not read it (a ZRANK fewer). Either way every change event carries the exact ranks before and after
// for every change that touches the live top. Checked against a brute-force model over random submissions on
// BEST and LATEST boards, with and without an exact tier.
func TestPreviousRankOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		board    lb.Board
		skipping bool // the store may leave previous ranks out
	}{
		{"best", lb.Board{ID: "b", Order: lb.Desc, Mode: lb.Best}, true},
		{"best-asc-exactTop", lb.Board{ID: "b", Order: lb.Asc, Mode: lb.Best, ExactTop: 150}, true},
		{"latest", lb.Board{ID: "b", Order: lb.Desc, Mode: lb.Latest}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := redistest.Standalone(t)
			rdb := srv.Client(t).(*redis.Client)
			s := lb.New(rdb, lb.Config{Prefix: "prev"})
			b := mustBoard(t, s, tc.board)
			m := &rankModel{desc: b.Order == lb.Desc, mode: b.Mode, score: map[string]float64{}, arrival: map[string]int{}}
			exactOnly := tc.board.ExactTop > 0 // estimated ranks are not the model's: compare exact ones

			pubsub := rdb.SSubscribe(ctx, s.Channel("b"))
			defer pubsub.Close()
			if _, err := pubsub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var changes []lb.Change
			var lastVer int64
			var decodeErr error
			go func() {
				for msg := range pubsub.Channel() {
					ev, err := lb.DecodeEvent([]byte(msg.Payload))
					mu.Lock()
					if err != nil && decodeErr == nil {
						decodeErr = fmt.Errorf("event %q: %w", msg.Payload, err)
					}
					changes = append(changes, ev.Changes...)
					lastVer = ev.Version
					mu.Unlock()
				}
			}()

			type item struct {
				player      string
				prev, rank  int64
				changed     bool
				mustPublish bool
			}
			var items []item
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			var published int64
			skipped := 0
			for round := range 60 {
				subs := make([]lb.Submission, 50)
				for k := range subs {
					player := fmt.Sprint("p", rng.IntN(600))
					if round < 8 {
						player = fmt.Sprint("p", round*50+k) // 400 players first
					}
					subs[k] = lb.Submission{Board: "b", Player: player, Score: float64(rng.IntN(20000))}
				}
				asked := round%2 == 1
				fields := lb.Fields(0)
				if asked {
					fields = lb.FieldPreviousRank
				}
				outs, err := s.SubmitMany(ctx, subs, lb.Only(fields))
				if err != nil {
					t.Fatal(err)
				}
				for k, o := range outs {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					r, sub := o.Result, subs[k]
					prev, rank, changed := m.submit(sub.Player, sub.Score)
					it := item{sub.Player, prev, rank, changed,
						changed && (rank <= lb.LiveTop || prev > 0 && prev <= lb.LiveTop)}
					items = append(items, it)
					what := fmt.Sprintf("round %d item %d (%s %v, asked %t)", round, k, sub.Player, sub.Score, asked)
					if r.Updated != changed {
						t.Fatalf("%s: updated %t, model %t", what, r.Updated, changed)
					}
					if (!exactOnly || !r.Entry.Approximate) && r.Entry.Rank != rank {
						t.Fatalf("%s: rank %d, model %d", what, r.Entry.Rank, rank)
					}
					exactPrev := !exactOnly || prev > 0 && prev <= int64(tc.board.ExactTop)
					switch {
					case r.PreviousRank == nil && prev == 0:
					case r.PreviousRank == nil:
						if asked || !tc.skipping || prev <= lb.LiveTop || rank <= lb.LiveTop {
							t.Fatalf("%s: no previous rank, model %d (rank %d)", what, prev, rank)
						}
						skipped++
					case prev == 0 || exactPrev && *r.PreviousRank != prev:
						t.Fatalf("%s: previous rank %d, model %d", what, *r.PreviousRank, prev)
					}
					published = max(published, r.EventVersion)
				}
			}
			if tc.skipping && skipped == 0 {
				t.Fatal("no previous rank was left out")
			}

			// Every event up to the last one a result named has arrived: then match the changes to the items in
			// order. A change must carry the model's ranks (its rank before only where that rank is exact); one that
			// touches the live top must be there; others (a new player's size change) may.
			deadline := time.Now().Add(30 * time.Second)
			for {
				mu.Lock()
				v := lastVer
				mu.Unlock()
				if v >= published {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("events up to version %d arrived, results name %d", v, published)
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if decodeErr != nil {
				t.Fatal(decodeErr)
			}
			j := 0
			for i, it := range items {
				if !it.changed {
					continue // nothing to announce: no names or metadata change here
				}
				// A new player's size change below an exact tier has an estimated rank.
				estimated := exactOnly && it.rank > int64(tc.board.ExactTop)
				if j < len(changes) && changes[j].Player == it.player && (changes[j].Rank == it.rank || estimated && it.prev == 0) {
					c := changes[j]
					if (!exactOnly || it.prev <= lb.LiveTop) && c.Prev != it.prev {
						t.Fatalf("item %d (%s): the event's rank before %d, model %d", i, it.player, c.Prev, it.prev)
					}
					j++
					continue
				}
				if it.mustPublish {
					t.Fatalf("item %d (%s, %d -> %d) touched the live top, and its change is not in the events (next: %+v)",
						i, it.player, it.prev, it.rank, changes[min(j, len(changes)-1)])
				}
			}
			if j != len(changes) {
				t.Fatalf("%d changes published, %d matched to items; the next: %+v", len(changes), j, changes[j])
			}

			if !tc.skipping {
				return
			}
			// What it saves: an improvement that stays below the live top reads one rank (after) without the
			// previous rank, two with it.
			for _, fields := range []lb.Fields{0, lb.FieldPreviousRank} {
				var player string
				for p := range m.score {
					if r := m.rank(p); r > lb.LiveTop+20 && (!exactOnly || r <= int64(tc.board.ExactTop)) {
						player = p
						break
					}
				}
				if player == "" {
					t.Fatal("no player far enough below the live top")
				}
				x := m.score[player] + 0.5
				if !m.desc {
					x = m.score[player] - 0.5
				}
				prev, rank, _ := m.submit(player, x)
				if rank <= lb.LiveTop {
					t.Fatalf("%s moved to %d", player, rank)
				}
				before := commandCalls(t, rdb)
				r, err := s.Submit(ctx, lb.Submission{Board: "b", Player: player, Score: x}, lb.Only(fields))
				if err != nil {
					t.Fatal(err)
				}
				zranks := commandCalls(t, rdb)["zrank"] - before["zrank"]
				want, prevOK := 1, r.PreviousRank == nil
				if fields != 0 {
					want, prevOK = 2, r.PreviousRank != nil && *r.PreviousRank == prev
				}
				if zranks != want || r.Entry.Rank != rank || !prevOK {
					t.Fatalf("fields %b: %d ZRANKs (want %d), rank %d (model %d), previous %v (model %d)",
						fields, zranks, want, r.Entry.Rank, rank, r.PreviousRank, prev)
				}
			}
		})
	}
}
