package pubsub

import (
	"bytes"

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
