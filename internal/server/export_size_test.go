package server

import (
	"os"
	"strconv"
)

// exportBigPlayers is the size of the board of TestExportMemoryFlat: LB_EXPORT_PLAYERS, else 300,000 (enough
// rows for its heap bound to mean something; make test runs it so, without the race detector).
var exportBigPlayers = func() int {
	if n, err := strconv.Atoi(os.Getenv("LB_EXPORT_PLAYERS")); err == nil && n > 0 {
		return n
	}
	return 300_000
}()
