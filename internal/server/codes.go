package server

import (
	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The extensions.code values the HTTP layer writes itself (errors outside gqlgen's execution); their one owner
// is package leaderboard (and graph for the API-edge codes).
const (
	codeInvalid     = string(leaderboard.Invalid)
	codeInternal    = string(leaderboard.Internal)
	codeUnavailable = string(leaderboard.Unavailable)
	codeRateLimited = string(leaderboard.RateLimited)
	codeForbidden   = string(graph.Forbidden)
)
