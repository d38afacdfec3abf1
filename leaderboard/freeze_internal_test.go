package leaderboard

import (
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// A close event's top that freeze.go encodes from frozen standings (encodeCloseTop) reads back (decodeClose)
// exactly as it was: every field of the entry, whatever the player id, name, metadata and score.
func FuzzCloseTopEncoding(f *testing.F) {
	f.Add("p1", "Ann", true, "level", "3", 42.5, int64(1), int64(1), int64(1764450000), false)
	f.Add("<&>\"'\\", "", false, "", "", -9007199254740992.0, int64(7), int64(3), int64(946684800), true)
	f.Add("ü:*?[x]{b}", "😀\u2028", true, "k\x00", "\ud7ff", 0.1, int64(1000), int64(1000), int64(9999999999), true)
	f.Fuzz(func(t *testing.T, player, name string, named bool, mk, mv string, score float64, rank, tie, updated int64,
		desc bool) {
		if player == "" || !utf8.ValidString(player) || !utf8.ValidString(name) || math.IsNaN(score) ||
			math.Abs(score) > MaxScore || rank < 1 || tie < 1 || tie > rank || updated < 946684800 || updated > 9999999999 {
			return
		}
		b := &Board{ID: "b", Order: Asc, Windows: []Window{Daily}}
		if desc {
			b.Order = Desc
		}
		e := Entry{PlayerID: player, Rank: rank, TieRank: tie, Score: score, UpdatedAt: time.Unix(updated, 0).UTC()}
		if named {
			e.DisplayName = &name
		}
		if mk != "" {
			m, err := json.Marshal(map[string]string{mk: mv})
			if err != nil {
				t.Fatal(err)
			}
			e.Metadata = m
		}
		top, err := encodeCloseTop(b, []Entry{e})
		if err != nil {
			t.Fatal(err)
		}
		const size = 5000
		ev, err := decodeClose(b, redis.XMessage{ID: "1-0", Values: map[string]any{"board": "b", "window": "DAILY",
			"period": "2031-03-14", "size": "5000", "endedAt": "0", "recordedAt": "0", "top": top}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Top) != 1 {
			t.Fatalf("%d entries", len(ev.Top))
		}
		g := ev.Top[0]
		if g.PlayerID != e.PlayerID || g.Rank != e.Rank || g.TieRank != e.TieRank || g.Score != e.Score+0 ||
			!g.UpdatedAt.Equal(e.UpdatedAt) || string(g.Metadata) != string(e.Metadata) || g.Approximate ||
			g.TopPercent != TopPercent(rank, size) || (g.DisplayName == nil) != (e.DisplayName == nil) ||
			(g.DisplayName != nil && *g.DisplayName != *e.DisplayName) {
			t.Fatalf("read back %+v, want %+v (top %s)", g, e, top)
		}
	})
}
