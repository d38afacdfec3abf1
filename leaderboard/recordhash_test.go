package leaderboard_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// periodLayout reads a window period's record hashing: level, split pointer and hash version ("" when absent).
func periodLayout(t *testing.T, s *lb.Store, tg redistest.Target, board string) (lvl, sp int, hv string) {
	t.Helper()
	v, err := tg.Client.HMGet(context.Background(), lb.StateKey(s, board, lb.AllTime, lb.AllPeriod),
		"lvl", "sp", "hv").Result()
	if err != nil {
		t.Fatal(err)
	}
	lvl, _ = strconv.Atoi(fmt.Sprint(v[0]))
	sp, _ = strconv.Atoi(fmt.Sprint(v[1]))
	if v[2] != nil {
		hv = fmt.Sprint(v[2])
	}
	return lvl, sp, hv
}

// submitPlayers submits ids with scores 1, 2, 3, ... in batches of 1000.
func submitPlayers(t *testing.T, s *lb.Store, board string, ids []string) {
	t.Helper()
	for i := 0; i < len(ids); i += 1000 {
		var subs []lb.Submission
		for k := i; k < min(i+1000, len(ids)); k++ {
			subs = append(subs, lb.Submission{Board: board, Player: ids[k], Score: float64(k + 1)})
		}
		out, err := s.SubmitMany(context.Background(), subs)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
		}
	}
}

// A new window period places its records by hash version 2: every record is where the Go oracle puts it, every
// record hash is in use, and none holds more than three times the mean, for sequential, prefixed, numeric and
// long ids (version 1 crowded sequential ids into a third of the hashes, some at 6 to 14 times the mean).
func TestRecordHashSpreadsIDs(t *testing.T) {
	t.Parallel()
	redistest.WithoutRace(t)
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		const n = 6000
		for _, pattern := range []string{"p%d", "player-%d", "%d", "%08d-3f2c-4e8b-9a51-2b7c0d4e6f18"} {
			board := "spread-" + strings.NewReplacer("%", "", "-", "").Replace(pattern)
			mustBoard(t, s, lb.Board{ID: board})
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf(pattern, i)
			}
			submitPlayers(t, s, board, ids)
			lvl, sp, hv := periodLayout(t, s, tg, board)
			if hv != "2" {
				t.Fatalf("%s: hash version %q, want 2", pattern, hv)
			}
			buckets := 1<<lvl + sp
			count := make([]int, buckets)
			for _, id := range ids {
				b := lb.RecordBucket(2, lvl, sp, id)
				ok, err := tg.Client.HExists(ctx, lb.RecordsKey(s, board, lb.AllTime, lb.AllPeriod, b), id).Result()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					t.Fatalf("%s: %s is not in record hash %d", pattern, id, b)
				}
				count[b]++
			}
			mean, most := float64(n)/float64(buckets), 0
			for b, c := range count {
				if c == 0 {
					t.Errorf("%s: record hash %d of %d holds no player", pattern, b, buckets)
				}
				most = max(most, c)
			}
			if float64(most) > 3*mean {
				t.Errorf("%s: a record hash holds %d players, %.1f times the mean of %.1f", pattern, most,
					float64(most)/mean, mean)
			}
		}
	})
}

// A window period written before hash version 2 (no hv in its state, records placed by version 1) keeps being
// read and written by version 1: the same ranks, the players found again on resubmission (previous rank and score,
// no new player counted), and a new player's record placed by version 1.
func TestRecordHashVersion1Kept(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		board := "v1"
		mustBoard(t, s, lb.Board{ID: board})
		ids := make([]string, 800)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		submitPlayers(t, s, board, ids)
		view := lb.View{Board: board}
		before := make(map[string]lb.Entry, len(ids))
		for _, id := range ids {
			e, err := s.Rank(ctx, view, id)
			if err != nil {
				t.Fatal(err)
			}
			before[id] = *e
		}

		// The read without a script (friends') remembers the period's layout: version 2.
		if _, err := s.Ranks(ctx, view, ids[:10], lb.Only(0)); err != nil {
			t.Fatal(err)
		}

		// Move every record to where version 1 puts it and drop hv: the period as an older version left it.
		lvl, sp, _ := periodLayout(t, s, tg, board)
		records := map[string]string{}
		for b := 0; b < 1<<lvl+sp; b++ {
			key := lb.RecordsKey(s, board, lb.AllTime, lb.AllPeriod, uint64(b))
			m, err := tg.Client.HGetAll(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			for id, rec := range m {
				records[id] = rec
			}
			if err := tg.Client.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if len(records) != len(ids) {
			t.Fatalf("%d records, want %d", len(records), len(ids))
		}
		for id, rec := range records {
			b := lb.RecordBucket(1, lvl, sp, id)
			if err := tg.Client.HSet(ctx, lb.RecordsKey(s, board, lb.AllTime, lb.AllPeriod, b), id, rec).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tg.Client.HDel(ctx, lb.StateKey(s, board, lb.AllTime, lb.AllPeriod), "hv").Err(); err != nil {
			t.Fatal(err)
		}

		for _, id := range ids {
			e, err := s.Rank(ctx, view, id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*e, before[id]) {
				t.Fatalf("%s after the move: %+v, want %+v", id, *e, before[id])
			}
		}
		// So does the read without a script, though it last saw the period under version 2.
		plain := s.PlainStats().Reads
		p, err := s.Ranks(ctx, view, ids, lb.Only(lb.FieldUpdatedAt|lb.FieldMeta))
		if err != nil {
			t.Fatal(err)
		}
		if s.PlainStats().Reads != plain+1 || len(p.Entries) != len(ids) {
			t.Fatalf("plain reads %d -> %d, %d entries of %d", plain, s.PlainStats().Reads, len(p.Entries), len(ids))
		}
		for _, e := range p.Entries {
			w := before[e.PlayerID]
			w.TieRank = 0 // not asked
			if !reflect.DeepEqual(e, w) {
				t.Fatalf("%s after the move, read without a script: %+v, want %+v", e.PlayerID, e, w)
			}
		}
		// Resubmissions find the players: their previous rank and score, and no player counted twice. The best 50,
		// best first, each keeping its rank.
		for i := len(ids) - 1; i >= len(ids)-50; i-- {
			id := ids[i]
			r := mustSubmit(t, s, lb.Submission{Board: board, Player: id, Score: before[id].Score + 1000})
			if r.PreviousRank == nil || *r.PreviousRank != before[id].Rank || r.PreviousScore == nil ||
				*r.PreviousScore != before[id].Score || r.Size != int64(len(ids)) {
				t.Fatalf("%s resubmitted: %+v, want previous rank %d and score %v of %d players", id, r,
					before[id].Rank, before[id].Score, len(ids))
			}
		}
		// New players go where version 1 puts them, and the period stays at version 1.
		for i := range 100 {
			id := fmt.Sprint("new-", i)
			mustSubmit(t, s, lb.Submission{Board: board, Player: id, Score: 1})
			lvl, sp, hv := periodLayout(t, s, tg, board)
			if hv != "1" && hv != "" {
				t.Fatalf("hash version %q after a write, want 1 or none", hv)
			}
			b := lb.RecordBucket(1, lvl, sp, id)
			ok, err := tg.Client.HExists(ctx, lb.RecordsKey(s, board, lb.AllTime, lb.AllPeriod, b), id).Result()
			if err != nil || !ok {
				t.Fatalf("%s is not in version 1's record hash %d (%v)", id, b, err)
			}
		}
		if size, err := s.Size(ctx, view); err != nil || size != int64(len(ids)+100) {
			t.Fatalf("size %d (%v), want %d", size, err, len(ids)+100)
		}
	})
}
