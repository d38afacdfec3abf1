package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// TestShardedSnapshotWhileWritten: an export of a sharded board (Snapshot, paged as the export pages it, 5 rows a
// page so that the merge goes on across pages) while writers keep raising players on every shard, each write with
// the name and metadata of its score, the test timing every write. Every export lists each player once, with the
// score of a write that started before the copy ended and no later write acknowledged before the export began, and
// with that write's name and metadata; ranks 1..n in order, tieRank counting the better scores, equal scores in
// the order their writes reached the board (a write acknowledged before another began ranks before it); size and
// topPercent of the rows. (Each shard's copy is of its own moment: a write on one shard may be in while an earlier
// acknowledged one on another shard is not, when that shard's copy ran first; that is not checked here.)
func TestShardedSnapshotWhileWritten(t *testing.T) {
	t.Parallel()
	rdb := shardClient(t)
	ctx := context.Background()
	s, _ := shardStore(t, rdb)
	const shards, pairs = 3, 6
	b := mustBoard(t, s, lb.Board{ID: "export-moment", Shards: shards})
	ps := onShards(t, "x", shards, pairs)

	type write struct{ start, ack time.Time }
	var mu sync.Mutex
	writes := map[string][]write{} // player -> its writes; writes[p][n-1] is the one of score n
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, pairs)
	for w := range pairs {
		a, bb := ps[w%shards][w/shards+pairs/shards], ps[(w+1)%shards][w/shards] // on shards w and w+1
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				for _, p := range []string{a, bb} {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					_, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: p, Score: float64(n),
						DisplayName: ptr(fmt.Sprintf("r%d", n)), Metadata: json.RawMessage(fmt.Sprintf(`{"r":%d}`, n))},
						lb.Only(0))
					if err != nil {
						errs <- fmt.Errorf("%s to %d: %w", p, n, err)
						return
					}
					mu.Lock()
					writes[p] = append(writes[p], write{start, time.Now()})
					mu.Unlock()
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	time.Sleep(50 * time.Millisecond)
	for round := range 40 {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		began := time.Now()
		sn, err := s.Snapshot(ctx, lb.View{Board: b.ID})
		ended := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		var rows []lb.Entry
		for off := 0; off < int(sn.Rows); off += 5 { // small pages: the merge goes on across them
			p, err := sn.Page(ctx, off, 5)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, p.Entries...)
		}
		_ = sn.Close(ctx)
		mu.Lock()
		hist := map[string][]write{}
		for p, ws := range writes {
			hist[p] = append([]write(nil), ws...)
		}
		mu.Unlock()
		if int64(len(rows)) != sn.Rows || sn.Size != sn.Rows {
			t.Fatalf("round %d: %d rows, Rows %d, Size %d", round, len(rows), sn.Rows, sn.Size)
		}
		at := map[string]int{}
		for i, e := range rows {
			if _, dup := at[e.PlayerID]; dup {
				t.Fatalf("round %d: %s listed twice", round, e.PlayerID)
			}
			at[e.PlayerID] = i
			n := int(e.Score)
			ws := hist[e.PlayerID]
			// n == len(ws)+1: a write still in flight when the history was read.
			if n < 1 || n > len(ws)+1 || (n <= len(ws) && !ws[n-1].start.Before(ended)) {
				t.Fatalf("round %d: %s at %d: no write of it started before the copy ended (%d writes)", round,
					e.PlayerID, n, len(ws))
			}
			if n < len(ws) && ws[n].ack.Before(began) {
				t.Fatalf("round %d: %s at %d, but its write of %d was acknowledged before the export began", round,
					e.PlayerID, n, n+1)
			}
			if e.DisplayName == nil || *e.DisplayName != fmt.Sprintf("r%d", n) || string(e.Metadata) != fmt.Sprintf(`{"r":%d}`, n) {
				t.Fatalf("round %d: %s at %d with name %v and metadata %s", round, e.PlayerID, n, e.DisplayName, e.Metadata)
			}
			if e.Rank != int64(i+1) || e.TopPercent != lb.TopPercent(e.Rank, sn.Size) {
				t.Fatalf("round %d: row %d: %+v", round, i, e)
			}
			tie := int64(i + 1)
			if i > 0 && rows[i-1].Score == e.Score {
				tie = rows[i-1].TieRank
			}
			if e.TieRank != tie || (i > 0 && rows[i-1].Score < e.Score) {
				t.Fatalf("round %d: row %d: %+v after %+v", round, i, e, rows[i-1])
			}
		}
		for p, ws := range hist {
			if _, ok := at[p]; !ok && len(ws) > 0 && ws[0].ack.Before(began) {
				t.Fatalf("round %d: %s missing, acknowledged before the export began", round, p)
			}
		}
		for i := range rows {
			for j := i + 1; j < len(rows) && rows[j].Score == rows[i].Score; j++ {
				n := int(rows[i].Score)
				x, y := hist[rows[i].PlayerID], hist[rows[j].PlayerID]
				if n <= len(x) && n <= len(y) && y[n-1].ack.Before(x[n-1].start) {
					t.Fatalf("round %d: %s ranks %d before %s (%d) at %d, which reached it first", round,
						rows[i].PlayerID, rows[i].Rank, rows[j].PlayerID, rows[j].Rank, n)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
