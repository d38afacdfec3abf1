package leaderboard

import (
	"context"
	"strconv"
)

// Hooks for the tests of package leaderboard_test.

// SetArrivalCounter sets the arrival counter of a window period to n (the next change gets n+1).
func SetArrivalCounter(ctx context.Context, s *Store, board string, w Window, period string, n uint64) error {
	return s.rdb.HSet(ctx, s.keyBase(board)+"s:"+windowCodes[w]+":"+period, "seq", strconv.FormatUint(n&(1<<32-1), 10),
		"sqh", strconv.FormatUint(n>>32, 10)).Err()
}

// NamesKey returns the key of a board's display names and metadata.
func NamesKey(s *Store, board string) string { return s.keyBase(board) + "m" }

// DefKey returns the key of a board's definition.
func DefKey(s *Store, board string) string { return s.keyBase(board) + "def" }

// RegistryKey returns the board list that holds board.
func RegistryKey(s *Store, board string) string { return s.registryKey(board) }

// LibraryFunctions returns how many functions the store's function library registers (one per script).
func LibraryFunctions() int { return len(library.fn) }

// FenceKey returns the close fence of a window period (fence_key in common.lua; Go reads it through fence.lua).
func FenceKey(s *Store, board string, w Window, period string) string {
	return s.keyBase(board) + "x:" + windowCodes[w] + ":" + period
}

// SeasonRegistryKey returns the registry of a board's readable seasons (season.lua).
func SeasonRegistryKey(s *Store, board string) string { return s.keyBase(board) + "seasons" }

// SeasonStateKey returns the state of a board's SEASON window (season.lua, common.lua's season_state).
func SeasonStateKey(s *Store, board string) string { return s.keyBase(board) + "season" }

// PeriodKey returns the key of a window period's kind (common.lua's key map: "s" state, "z" ranking), and
// RecordsKey its record hash number n.
func PeriodKey(s *Store, board, kind string, w Window, period string) string {
	return s.keyBase(board) + kind + ":" + windowCodes[w] + ":" + period
}

func RecordsKey(s *Store, board string, w Window, period string, n uint64) string {
	return PeriodKey(s, board, "r", w, period) + ":" + strconv.FormatUint(n, 10)
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
