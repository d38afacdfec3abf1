package pubsub

import (
	"bytes"
	"slices"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Diff returns what turns the list prev into next (both in rank order): the rows of next that are new or whose
// rank, tieRank, score, updatedAt, display name or metadata changed, and the ids of prev's players that are not in next.
func Diff(prev, next []leaderboard.Entry) (changed []leaderboard.Entry, removed []string) {
	old := make(map[string]*leaderboard.Entry, len(prev))
	for i := range prev {
		old[prev[i].PlayerID] = &prev[i]
	}
	for i := range next {
		e := &next[i]
		if o, ok := old[e.PlayerID]; !ok || !sameRow(o, e) {
			changed = append(changed, *e)
		}
		delete(old, e.PlayerID)
	}
	for i := range prev { // in prev's order, so the result is deterministic
		if _, gone := old[prev[i].PlayerID]; gone {
			removed = append(removed, prev[i].PlayerID)
		}
	}
	return changed, removed
}

func sameRow(a, b *leaderboard.Entry) bool {
	return a.Rank == b.Rank && a.TieRank == b.TieRank && a.Score == b.Score && a.Approximate == b.Approximate && a.UpdatedAt.Equal(b.UpdatedAt) &&
		(a.DisplayName == nil) == (b.DisplayName == nil) && (a.DisplayName == nil || *a.DisplayName == *b.DisplayName) &&
		bytes.Equal(a.Metadata, b.Metadata)
}

// Apply applies one update to a client's list and returns the new list (list itself is not modified): a
// snapshot replaces it; a diff drops the removed players, replaces or inserts the changed rows and keeps the
// list in rank order, at most first long. Clients rebuild their lists with exactly this rule (see
// testdata/diffs.json, which the dashboard's JavaScript is tested against too).
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
