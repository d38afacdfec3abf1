package pubsub

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/leaderboard/leaderboard/internal/livelist"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// row is an entry as diffs.json spells it (the dashboard's JavaScript reads the same file).
type row struct {
	PlayerID string  `json:"playerId"`
	Rank     int64   `json:"rank"`
	Score    float64 `json:"score"`
}

type diffCase struct {
	Name     string `json:"name"`
	First    int    `json:"first"`
	Snapshot []row  `json:"snapshot"`
	Updates  []struct {
		Entries []row    `json:"entries"`
		Removed []string `json:"removed"`
	} `json:"updates"`
	Expected []row `json:"expected"`
}

func toEntries(rs []row) []leaderboard.Entry {
	out := []leaderboard.Entry{}
	for _, r := range rs {
		out = append(out, leaderboard.Entry{PlayerID: r.PlayerID, Rank: r.Rank, Score: r.Score})
	}
	return out
}

func toRows(es []leaderboard.Entry) []row {
	out := []row{}
	for _, e := range es {
		out = append(out, row{e.PlayerID, e.Rank, e.Score})
	}
	return out
}

func TestDiffTable(t *testing.T) {
	data, err := os.ReadFile("testdata/diffs.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []diffCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("only %d cases in diffs.json", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			list := livelist.Apply(nil, true, toEntries(c.Snapshot), nil, c.First)
			for _, u := range c.Updates {
				list = livelist.Apply(list, false, toEntries(u.Entries), u.Removed, c.First)
			}
			if got := toRows(list); !slices.Equal(got, c.Expected) && !(len(got) == 0 && len(c.Expected) == 0) {
				t.Fatalf("rebuilt %v, want %v", got, c.Expected)
			}
			// What Diff produces for the same start and end must rebuild the same list.
			start, end := toEntries(c.Snapshot), toEntries(c.Expected)
			changed, removed := Diff(start, end)
			if got := toRows(livelist.Apply(start, false, changed, removed, c.First)); !slices.Equal(got, toRows(end)) {
				t.Fatalf("Diff then Apply gave %v, want %v", got, c.Expected)
			}
		})
	}
}

// TestDiffRandom checks Diff+Apply against random successive top lists.
func TestDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randomList := func() []leaderboard.Entry {
		n := r.IntN(12)
		ids := r.Perm(20)[:n]
		out := make([]leaderboard.Entry, n)
		for i, id := range ids {
			out[i] = leaderboard.Entry{PlayerID: "p" + strconv.Itoa(id), Rank: int64(i + 1),
				Score: float64(100 - i - r.IntN(2))}
		}
		return out
	}
	cur := randomList()
	client := livelist.Apply(nil, true, cur, nil, 10)
	for range 2000 {
		next := randomList()
		changed, removed := Diff(cur[:min(10, len(cur))], next[:min(10, len(next))])
		client = livelist.Apply(client, false, changed, removed, 10)
		if !slices.Equal(toRows(client), toRows(next[:min(10, len(next))])) {
			t.Fatalf("rebuilt %v, want %v", toRows(client), toRows(next))
		}
		cur = next
	}
}
