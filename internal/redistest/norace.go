//go:build !race

package redistest

// Race reports that the tests were built with the race detector.
const Race = false
