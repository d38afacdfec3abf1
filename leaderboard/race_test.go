//go:build race

package leaderboard_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
