package leaderboard

// PlainStats counts the reads a Store answered with plain Redis commands instead of a Lua script (ranksplain.go,
// aroundplain.go): a script blocks Redis while it runs, plain reads do not.
type PlainStats struct {
	Reads   int64 // Ranks reads, and aroundMe reads by player
	Arounds int64 // of Reads, the aroundMe reads by player
	Retries int64 // snapshots of plain reads taken again because a write landed between their round trips
}

// PlainStats returns what the store's plain reads have done since it was made.
func (s *Store) PlainStats() PlainStats {
	return PlainStats{Reads: s.plainReads.Load(), Arounds: s.plainArounds.Load(), Retries: s.plainRetries.Load()}
}
