package server

// exportBigPlayers is the size of the board of TestExportMemoryFlat.
const exportBigPlayers = 300_000
