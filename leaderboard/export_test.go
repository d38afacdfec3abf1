package leaderboard

import (
	"context"
	"strconv"
)

// Hooks for the tests of package leaderboard_test.

// SetArrivalCounter sets the arrival counter of a window period to n (the next change gets n+1).
func SetArrivalCounter(ctx context.Context, s *Store, board string, w Window, period string, n uint64) error {
	return s.rdb.HSet(ctx, s.stateKey(board, w, period), "seq", strconv.FormatUint(n&(1<<32-1), 10),
		"sqh", strconv.FormatUint(n>>32, 10)).Err()
}

// NamesKey returns the key of a board's display names and metadata.
func NamesKey(s *Store, board string) string { return keyNames.of(s.keyBase(board)) }

// DefKey returns the key of a board's definition.
func DefKey(s *Store, board string) string { return keyDef.of(s.keyBase(board)) }

// TombKey returns the tombstone of a board's deletion (delete.lua).
func TombKey(s *Store, board string) string { return keyTomb.of(s.keyBase(board)) }

// RegistryKey returns the board list that holds board.
func RegistryKey(s *Store, board string) string { return s.registryKey(board) }

// LibraryFunctions returns how many functions the store's function library registers (one per script).
func LibraryFunctions() int { return len(library.fn) }

// FenceKey returns the close fence of a window period (fence_key in common.lua; Go reads it through fence.lua).
func FenceKey(s *Store, board string, w Window, period string) string {
	return keyFence.at(s.keyBase(board), w, period)
}

// SeasonRegistryKey returns the registry of a board's readable seasons (season.lua).
func SeasonRegistryKey(s *Store, board string) string { return keySeasons.of(s.keyBase(board)) }

// SeasonStateKey returns the state of a board's SEASON window (season.lua, common.lua's season_state).
func SeasonStateKey(s *Store, board string) string { return keySeason.of(s.keyBase(board)) }

// StateKey returns the state of a window period (keys.go's keyState), RankingKey its sorted set and RecordsKey its
// record hash number n.
func StateKey(s *Store, board string, w Window, period string) string {
	return s.stateKey(board, w, period)
}

func RankingKey(s *Store, board string, w Window, period string) string {
	return keyRanking.at(s.keyBase(board), w, period)
}

func RecordsKey(s *Store, board string, w Window, period string, n uint64) string {
	return keyRecords.atN(s.keyBase(board), w, period, n)
}

// RecordBucket is the record hash number of a player id in a period of layout lvl, sp and hash version hv
// (record.go, Go's reading of common.lua's record_key).
func RecordBucket(hv, lvl, sp int, id string) uint64 {
	return recordLayout{lvl: lvl, sp: sp, hv: hv}.bucket(id)
}

// AbandonSnapshot stops a snapshot's renewals and leaves its keys, as a process that died mid-export would.
func AbandonSnapshot(sn *Snapshot) {
	sn.once.Do(func() {
		close(sn.stop)
		<-sn.done
	})
}

// SetBoardArrivals sets a sharded board's board-wide arrival counter (arrivals.lua, on shard 0) to n: the next
// submission gets n+1.
func SetBoardArrivals(ctx context.Context, s *Store, board string, n int64) error {
	return s.rdb.HSet(ctx, keyCounters.of(s.keyBase(board)), "arr", n).Err()
}
