// Package livelist is, for tests, the rule by which a client rebuilds a top list from the topUpdates messages of
// package pubsub (a snapshot, then diffs from pubsub.Diff): the tests of pubsub and of the server hold what the
// hub sends to it, and pubsub/testdata/diffs.json holds it to the dashboard's JavaScript.
package livelist

import (
	"slices"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Apply applies one update to a client's list and returns the new list (list itself is not modified): a
// snapshot replaces it; a diff drops the removed players, replaces or inserts the changed rows and keeps the
// list in rank order, at most first long. Clients rebuild their lists with exactly this rule (see
// pubsub/testdata/diffs.json, which the dashboard's JavaScript is tested against too).
func Apply(list []leaderboard.Entry, snapshot bool, entries []leaderboard.Entry, removed []string,
	first int) []leaderboard.Entry {
	var out []leaderboard.Entry
	if snapshot {
		out = slices.Clone(entries)
	} else {
		drop := make(map[string]bool, len(removed)+len(entries))
		for _, id := range removed {
			drop[id] = true
		}
		for _, e := range entries {
			drop[e.PlayerID] = true
		}
		out = make([]leaderboard.Entry, 0, len(list)+len(entries))
		for _, e := range list {
			if !drop[e.PlayerID] {
				out = append(out, e)
			}
		}
		out = append(out, entries...)
	}
	slices.SortStableFunc(out, func(a, b leaderboard.Entry) int { return int(a.Rank - b.Rank) })
	if first > 0 && len(out) > first {
		out = out[:first]
	}
	return out
}
