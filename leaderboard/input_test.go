package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// boardKeys lists every key of a board on every node.
func boardKeys(t *testing.T, s *lb.Store, tg redistest.Target, board string) []string {
	t.Helper()
	pattern := s.BoardKeys(board)
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
	switch c := tg.Client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("unexpected client type %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

var hostileIDs = []string{"{", "}", "{}", "a{b}c", "}{", "::", "a:b:{c}", "with space", "🎮🏆", "日本語", "x\x00y",
	strings.Repeat("🎮", 32), "*", "[a-z]", "?"}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		b := mustBoard(t, s, lb.Board{ID: "strict", Windows: []lb.Window{lb.AllTime, lb.Daily}, MinScore: ptr(0.0),
			MaxScore: ptr(1000.0)})
		mustSubmit(t, s, lb.Submission{Board: b.ID, Player: "ok", Score: 1})
		before := snapshot(t, s, tg, b.ID)
		bigMeta := json.RawMessage(`{"k":"` + strings.Repeat("x", 1100) + `"}`)
		long := strings.Repeat("x", 129)
		cases := []lb.Submission{
			{Board: b.ID, Player: "p", Score: math.NaN()},
			{Board: b.ID, Player: "p", Score: math.Inf(1)},
			{Board: b.ID, Player: "p", Score: math.Inf(-1)},
			{Board: b.ID, Player: "p", Score: 1<<53 + 2},
			{Board: b.ID, Player: "p", Score: -1},
			{Board: b.ID, Player: "p", Score: 1000.5},
			{Board: b.ID, Player: "", Score: 1},
			{Board: b.ID, Player: long, Score: 1},
			{Board: b.ID, Player: "bad\xffutf8", Score: 1},
			{Board: b.ID, Player: "p", Score: 1, EventID: long},
			{Board: b.ID, Player: "p", Score: 1, Metadata: bigMeta},
			{Board: b.ID, Player: "p", Score: 1, Metadata: json.RawMessage(`[1,2]`)},
			{Board: b.ID, Player: "p", Score: 1, Metadata: json.RawMessage(`{"a":`)},
			{Board: b.ID, Player: "p", Score: 1, DisplayName: ptr("bad\xff")},
			{Board: "", Player: "p", Score: 1},
			{Board: long, Player: "p", Score: 1},
			{Board: "\xff\xfe", Player: "p", Score: 1},
		}
		for _, c := range cases {
			_, err := s.Submit(ctx, c)
			if lb.ErrorCode(err) != lb.Invalid {
				t.Errorf("Submit(player %q, score %v, event %q): got %v, want BAD_USER_INPUT", c.Player, c.Score, c.EventID, err)
			}
		}
		if _, err := s.Submit(ctx, lb.Submission{Board: "nope", Player: "p", Score: 1}); lb.ErrorCode(err) != lb.NotFound {
			t.Errorf("unknown board: %v", err)
		}
		tooMany := make([]lb.Submission, lb.MaxBulk+1)
		if _, err := s.SubmitMany(ctx, tooMany); lb.ErrorCode(err) != lb.Invalid {
			t.Errorf("%d bulk items: %v", len(tooMany), err)
		}
		sameSnapshot(t, "bad input", before, snapshot(t, s, tg, b.ID))
		if n, _ := s.Size(ctx, lb.View{Board: b.ID}); n != 1 {
			t.Fatalf("size %d after bad input", n)
		}
		for _, bad := range []lb.Board{{ID: ""}, {ID: long}, {ID: "x", TimeZone: "Mars/Olympus"}, {ID: "x", Windows: []lb.Window{"HOURLY"}},
			{ID: "x", Windows: []lb.Window{lb.Daily, lb.Daily}}, {ID: "x", ExactTop: -1}, {ID: "x", MinScore: ptr(5.0), MaxScore: ptr(1.0)},
			{ID: "x", Order: "UP"}, {ID: "x", Mode: "MAX"}, {ID: "x", MinScore: ptr(math.NaN())}} {
			if _, err := s.CreateBoard(ctx, bad); lb.ErrorCode(err) != lb.Invalid {
				t.Errorf("CreateBoard(%+v): %v", bad, err)
			}
		}
		// Read limits.
		v := lb.View{Board: b.ID}
		if _, err := s.Top(ctx, v, 0, lb.MaxFirst+1); lb.ErrorCode(err) != lb.Invalid {
			t.Errorf("top first>max: %v", err)
		}
		if _, err := s.Around(ctx, v, "ok", lb.MaxRadius+1); lb.ErrorCode(err) != lb.Invalid {
			t.Errorf("around radius>max: %v", err)
		}
		if _, err := s.Friends(ctx, v, "ok", make([]string, lb.MaxFriends+1)); lb.ErrorCode(err) != lb.Invalid {
			t.Errorf("too many friends: %v", err)
		}
		if _, err := s.Top(ctx, lb.View{Board: b.ID, Window: lb.Weekly}, 0, 1); lb.ErrorCode(err) != lb.Invalid {
			t.Errorf("window the board lacks: %v", err)
		}
	})
}

func TestCreateBoardIsIdempotentAndConflicts(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, _ redistest.Target) {
		ctx := context.Background()
		def := lb.Board{ID: "laps", Order: lb.Asc, Windows: []lb.Window{lb.Weekly, lb.AllTime}, TimeZone: "Europe/Berlin"}
		mustBoard(t, s, def)
		if _, err := s.CreateBoard(ctx, def); err != nil {
			t.Fatalf("same definition again: %v", err)
		}
		other := def
		other.Order = lb.Desc
		if _, err := s.CreateBoard(ctx, other); lb.ErrorCode(err) != lb.Conflict {
			t.Fatalf("different definition: %v", err)
		}
		// A second store (another process) reads the definition from Redis.
		s2 := lb.New(s.Redis(), lb.Config{Prefix: s.Prefix()})
		got, err := s2.Board(ctx, "laps")
		if err != nil || got.Order != lb.Asc || got.TimeZone != "Europe/Berlin" || got.Grace != lb.DefaultGrace {
			t.Fatalf("definition read back: %+v %v", got, err)
		}
		if _, err := s2.Board(ctx, "missing"); lb.ErrorCode(err) != lb.NotFound {
			t.Fatalf("missing board: %v", err)
		}
		list, err := s2.Boards(ctx)
		if err != nil || len(list) != 1 || list[0].ID != "laps" {
			t.Fatalf("Boards: %v %v", list, err)
		}
	})
}

func TestHostileBoardIDsShareOneSlotAndStayApart(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, s *lb.Store, tg redistest.Target) {
		ctx := context.Background()
		for i, id := range hostileIDs {
			b := mustBoard(t, s, lb.Board{ID: id, Windows: []lb.Window{lb.AllTime, lb.Daily, lb.Weekly, lb.Monthly}, ExactTop: 2})
			for j := range 4 {
				mustSubmit(t, s, lb.Submission{Board: b.ID, Player: fmt.Sprintf("p%d{%d}", j, i), Score: float64(i*10 + j),
					EventID: fmt.Sprintf("ev:{%d}:%d", i, j), DisplayName: ptr(id)})
			}
			keys := boardKeys(t, s, tg, id)
			if len(keys) < 10 {
				t.Fatalf("board %q has only keys %v", id, keys)
			}
			slots := map[int64]bool{}
			for _, k := range keys {
				slot, err := tg.Client.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					if !tg.Cluster {
						break // standalone servers do not answer CLUSTER KEYSLOT
					}
					t.Fatal(err)
				}
				slots[slot] = true
			}
			if tg.Cluster && len(slots) != 1 {
				t.Fatalf("board %q keys span slots %v", id, slots)
			}
		}
		// Each board sees only its own players (four, of whom the best two are in the exact tier).
		for i, id := range hostileIDs {
			p, err := s.Top(ctx, lb.View{Board: id}, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if p.Size != 4 || len(p.Entries) != 2 {
				t.Fatalf("board %q: %+v", id, p)
			}
			for r, e := range p.Entries {
				if e.PlayerID != fmt.Sprintf("p%d{%d}", 3-r, i) || *e.DisplayName != id || e.Score != float64(i*10+3-r) {
					t.Fatalf("board %q rank %d: %+v", id, r+1, e)
				}
			}
		}
	})
}
