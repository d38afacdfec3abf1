package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// keysMatching returns the keys that match pattern, on every primary of a cluster.
func keysMatching(t *testing.T, tg redistest.Target, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := tg.Client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, tg.Client.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// allPages reads every row of a ranking, a page of 1000 at a time, through Top or a snapshot (page).
func allPages(t *testing.T, page func(offset int) (*lb.Page, error)) (rows []lb.Entry, size int64) {
	t.Helper()
	for offset := 0; ; offset += lb.MaxFirst {
		p, err := page(offset)
		if err != nil {
			t.Fatal(err)
		}
		rows, size = append(rows, p.Entries...), p.Size
		if len(p.Entries) < lb.MaxFirst {
			return rows, size
		}
	}
}

// TestSnapshotIsOneMoment: a snapshot lists, page by page, exactly what Top listed just before it was taken
// (every field of every row, and the size), however the board changes after it: scores moved, names and
// metadata changed, players removed and added. Checked on a board copied whole, on an exactTop board whose
// tail records are left out (only the exact tier's are copied), and on a DAILY window whose board has many more
// named players in another period (only the listed players' names are copied); the copy's entries are counted
// to show which. Close deletes every key of the snapshot; a closed snapshot is NOT_FOUND.
func TestSnapshotIsOneMoment(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		day := time.Date(2030, 6, 15, 12, 0, 0, 0, time.UTC)
		st, clock := clockedStore(s, tg, day.AddDate(0, 0, -1))
		submit := func(board string, from, to int, score func(i int) float64, tag string) {
			var subs []lb.Submission
			for i := from; i < to; i++ {
				sub := lb.Submission{Board: board, Player: fmt.Sprintf("p%05d", i), Score: score(i)}
				if i%3 != 1 {
					name := fmt.Sprintf("%s-%d", tag, i)
					sub.DisplayName = &name
				}
				if i%4 == 0 {
					sub.Metadata = json.RawMessage(fmt.Sprintf(`{"tag":%q}`, tag))
				}
				subs = append(subs, sub)
				if len(subs) == lb.MaxBulk || i == to-1 {
					outs, err := st.SubmitMany(ctx, subs)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range outs {
						if o.Err != nil {
							t.Fatal(o.Err)
						}
					}
					subs = subs[:0]
				}
			}
		}
		mustBoard(t, st, lb.Board{ID: "whole", Mode: lb.Latest})
		mustBoard(t, st, lb.Board{ID: "tail", Mode: lb.Latest, ExactTop: 100})
		mustBoard(t, st, lb.Board{ID: "daily", Mode: lb.Latest, Windows: []lb.Window{lb.Daily}})
		submit("daily", 0, 5000, func(i int) float64 { return float64(i % 50) }, "yesterday")
		clock.Set(day)
		submit("whole", 0, 2500, func(i int) float64 { return float64(i % 40) }, "before")
		submit("tail", 0, 1000, func(i int) float64 { return float64(i % 400) }, "before")
		submit("daily", 0, 600, func(i int) float64 { return float64(i % 30) }, "before")

		for _, c := range []struct {
			board               string
			copyRecs, copyNames bool
			rows                int64
		}{
			{"whole", true, true, 2500},
			{"tail", false, false, 100}, // 100 exact of 1000
			{"daily", true, false, 600}, // 600 today, 5000 named yesterday
		} {
			v := lb.View{Board: c.board}
			before, size := allPages(t, func(offset int) (*lb.Page, error) { return st.Top(ctx, v, offset, lb.MaxFirst) })
			sn, err := st.Snapshot(ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			if sn.Rows != c.rows || sn.Rows != int64(len(before)) || sn.Size != size {
				t.Fatalf("%s: snapshot of %d rows, size %d; top listed %d, size %d", c.board, sn.Rows, sn.Size,
					len(before), size)
			}
			// What the copy holds: every record of the period or only the listed players', every name of the
			// board or only the listed players'.
			wantRecs, wantNames := sn.Rows, int64(0)
			if c.copyRecs {
				wantRecs = sn.Size
			}
			if c.copyNames {
				wantNames = tg.Client.HLen(ctx, lb.NamesKey(s, c.board)).Val()
			} else {
				for _, e := range before {
					if e.DisplayName != nil || e.Metadata != nil {
						wantNames++
					}
				}
			}
			recs, names := int64(0), int64(0)
			for _, k := range keysMatching(t, tg, s.SnapshotKeys(c.board)) {
				switch {
				case strings.Contains(k, ":r:"):
					recs += tg.Client.HLen(ctx, k).Val()
				case strings.HasSuffix(k, ":m"):
					names = tg.Client.HLen(ctx, k).Val()
				}
			}
			for _, k := range keysMatching(t, tg, s.SnapshotKeys(c.board)) { // the default TTL: a minute
				if d := tg.Client.PTTL(ctx, k).Val(); d <= 0 || d > lb.DefaultSnapshotTTL || lb.DefaultSnapshotTTL != time.Minute {
					t.Fatalf("%s: TTL %v", k, d)
				}
			}
			if recs != wantRecs || names != wantNames || wantNames == 0 {
				t.Fatalf("%s: the snapshot holds %d records and %d names; want %d and %d", c.board, recs, names,
					wantRecs, wantNames)
			}

			// The board moves: new scores, names and metadata for a third of the players (moves across the
			// page boundaries), a player removed, new players.
			submit(c.board, 0, int(sn.Rows)/3, func(i int) float64 { return float64(1000 - i) }, "after")
			if _, err := st.RemovePlayer(ctx, c.board, before[len(before)-1].PlayerID); err != nil {
				t.Fatal(err)
			}
			submit(c.board, 9000, 9300, func(i int) float64 { return float64(i) }, "after")
			now, _ := allPages(t, func(offset int) (*lb.Page, error) { return st.Top(ctx, v, offset, lb.MaxFirst) })
			if reflect.DeepEqual(now[:10], before[:10]) {
				t.Fatalf("%s: the writes changed nothing", c.board)
			}

			got, gotSize := allPages(t, func(offset int) (*lb.Page, error) { return sn.Page(ctx, offset, lb.MaxFirst) })
			if gotSize != size || len(got) != len(before) {
				t.Fatalf("%s: snapshot pages give %d rows, size %d; want %d, %d", c.board, len(got), gotSize,
					len(before), size)
			}
			for i := range before {
				if !reflect.DeepEqual(got[i], before[i]) {
					t.Fatalf("%s row %d: snapshot %+v, top before the writes %+v", c.board, i+1, got[i], before[i])
				}
			}
			if err := sn.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if left := keysMatching(t, tg, s.SnapshotKeys(c.board)); len(left) > 0 {
				t.Fatalf("%s: keys left after Close: %v", c.board, left[:min(5, len(left))])
			}
			if _, err := sn.Page(ctx, 0, 10); lb.ErrorCode(err) != lb.NotFound {
				t.Fatalf("%s: Page after Close: %v, want NOT_FOUND", c.board, err)
			}
		}
	})
}

// TestSnapshotExpires: every key of a snapshot has a TTL of at most SnapshotTTL; the snapshot outlives that TTL
// while it is open (renewed), and once its renewals stop without a Close (a process that died) its keys are gone
// within the TTL. A snapshot of a board that is deleted is NOT_FOUND, and its keys go with the board's. A
// Snapshot call that gives up before Redis answers (its deadline passed while the copy ran) leaves no copy.
func TestSnapshotExpires(t *testing.T) {
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		const ttl = 900 * time.Millisecond
		st := lb.New(tg.Client, lb.Config{Prefix: s.Prefix(), SnapshotTTL: ttl})
		mustBoard(t, st, lb.Board{ID: "brief"})
		load(t, st, "brief", []float64{3, 1, 2, 5, 4})
		v := lb.View{Board: "brief"}

		sn, err := st.Snapshot(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		keys := keysMatching(t, tg, s.SnapshotKeys("brief"))
		if len(keys) < 3 { // state, ranking, records (no names)
			t.Fatalf("snapshot keys %v", keys)
		}
		for _, k := range keys {
			if d := tg.Client.PTTL(ctx, k).Val(); d <= 0 || d > ttl {
				t.Fatalf("%s: TTL %v, want within (0, %v]", k, d, ttl)
			}
		}
		renewed := time.Now().Add(3 * ttl)
		for time.Now().Before(renewed) {
			if p, err := sn.Page(ctx, 0, 10); err != nil || len(p.Entries) != 5 {
				t.Fatalf("open snapshot after %v: %v", time.Since(renewed.Add(-3*ttl)), err)
			}
			time.Sleep(ttl / 4)
		}

		lb.AbandonSnapshot(sn)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if len(keysMatching(t, tg, s.SnapshotKeys("brief"))) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an abandoned snapshot's keys are still there 10 s later (TTL %v)", ttl)
			}
		}

		sn, err = st.Snapshot(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		defer sn.Close(ctx)
		if ok, err := st.DeleteBoard(ctx, "brief"); !ok || err != nil {
			t.Fatalf("DeleteBoard = %v, %v", ok, err)
		}
		if _, err := sn.Page(ctx, 0, 10); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("Page of a deleted board's snapshot: %v, want NOT_FOUND", err)
		}
		if left := keysMatching(t, tg, s.SnapshotKeys("brief")); len(left) > 0 {
			t.Fatalf("keys left after the board's deletion: %v", left)
		}

		mustBoard(t, st, lb.Board{ID: "wide"})
		scores := make([]float64, 30_000)
		for i := range scores {
			scores[i] = float64(i % 1000)
		}
		load(t, st, "wide", scores)
		// A client whose calls end at their context's deadline, as the server's do.
		var rdb redis.UniversalClient
		if cc, ok := tg.Client.(*redis.ClusterClient); ok {
			o := *cc.Options()
			o.ContextTimeoutEnabled = true
			rdb = redis.NewClusterClient(&o)
		} else {
			o := *tg.Client.(*redis.Client).Options()
			o.ContextTimeoutEnabled = true
			rdb = redis.NewClient(&o)
		}
		defer rdb.Close()
		bounded := lb.New(rdb, lb.Config{Prefix: s.Prefix()})
		if _, err := bounded.Top(ctx, lb.View{Board: "wide"}, 0, 1); err != nil { // connected, library loaded
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Millisecond)
		defer cancel()
		if sn, err := bounded.Snapshot(short, lb.View{Board: "wide"}); err == nil {
			sn.Close(ctx)
			t.Log("the copy of 30,000 players was made within 2 ms: the give-up path was not taken")
		} else if lb.ErrorCode(err) != lb.Unavailable {
			t.Fatalf("Snapshot past its deadline: %v, want UNAVAILABLE", err)
		}
		for deadline := time.Now().Add(10 * time.Second); len(keysMatching(t, tg, s.SnapshotKeys("wide"))) > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a Snapshot that gave up left its copy")
			}
		}
	})
}
