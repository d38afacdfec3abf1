package server

import (
	"os"
	"strconv"
)

// exportBigPlayers is the size of the board of TestExportMemoryFlat: LB_EXPORT_PLAYERS, else 300,000 (the size
// that fits the race-detector run of make test; make test runs it again at 1,000,000 without the race detector).
var exportBigPlayers = func() int {
	if n, err := strconv.Atoi(os.Getenv("LB_EXPORT_PLAYERS")); err == nil && n > 0 {
		return n
	}
	return 300_000
}()
