// Package graph is the GraphQL layer of the service: gqlgen's generated executor (generated.go, and
// operation_generated.go, what its plugin in cmd/gqlgen exposes of it to this package's own paths), the resolvers
// (*.resolvers.go), the paths that write results without the generated marshalers (prepared.go and encode.go
// for the hot queries and mutations, live.go and stream.go for subscriptions), and the rules that only make
// sense at the API edge: roles, error codes, query depth and complexity. It holds no business rules; those live
// in package leaderboard, live fan-out in package pubsub.
package graph

import (
	"log/slog"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

// MaxLiveFirst is the largest `first` of topUpdates (the contract's 100, the hub's cached list).
const MaxLiveFirst = pubsub.MaxFirst

// Resolver is the root resolver; one serves every request.
type Resolver struct {
	Store *leaderboard.Store
	// Hub serves top lists from its cache and runs subscriptions.
	Hub *pubsub.Hub
	// Closes runs periodClosed subscriptions (nil: none).
	Closes *pubsub.CloseFeed
	Log    *slog.Logger
	// ReadKeyRequired: subscriptions need a key with the read role (see ReadGuard for queries).
	ReadKeyRequired bool
	// GeneratedOnly (for tests): every result is written by the generated marshalers. Otherwise submitScore,
	// submitScores, rank, aroundMe and friends results are written by the prepared path's encoder (prepared.go),
	// byte for byte what the generated marshalers write (the tests that set this compare the two), at a fraction
	// of the CPU.
	GeneratedOnly bool
	// OnSubscription, if set, is called with +1 when a subscription starts and -1 when it ends (metrics).
	OnSubscription func(field string, delta int)

	renderers topRenderers // of streamed topUpdates (live.go)
}

// changed tells the hub that a write may have changed a cached top list, so that a `top` query right after the
// write reads it (the change event that refreshes the cache may still be on its way). Writes far below the top
// leave the cache alone.
func (r *Resolver) changed(board string, res *leaderboard.Result) {
	if res == nil || !res.Updated || res.Duplicate {
		return
	}
	// Rank 0: a sharded board's submission that did not ask its rank, below the top on its own shard.
	if res.Entry.Rank > 0 && res.Entry.Rank <= pubsub.MaxFirst || res.PreviousRank != nil && *res.PreviousRank <= pubsub.MaxFirst {
		r.Hub.ChangedAt(board, res.EventEpoch, res.EventVersion)
	}
}

// NewSchema returns the executable schema over r with complexity estimates that count list fields by their
// size arguments, so a complexity limit bounds the work of a request.
func NewSchema(r *Resolver) graphql.ExecutableSchema {
	ls := liveSchema{ExecutableSchema: NewExecutableSchema(schemaConfig(r)), resolver: r}
	if !r.GeneratedOnly {
		ls.plans = newPreparedPlans()
	}
	return ls
}

// schemaConfig is NewSchema's configuration of the generated schema: r and the complexity functions.
func schemaConfig(r *Resolver) Config {
	cfg := Config{Resolvers: r}
	c := &cfg.Complexity
	c.Query.Leaderboards = func(child int) int { return 1 + 20*child }
	c.Query.Top = func(child int, _ string, first, _ *int, _ *model.Window, _ *string) int {
		return 1 + child*clampN(deref(first, 10), leaderboard.MaxFirst)
	}
	c.Query.AroundMe = func(child int, _, _ string, radius *int, _ *model.Window, _ *string) int {
		return 1 + child*(2*clampN(deref(radius, 5), leaderboard.MaxRadius)+1)
	}
	c.Query.Friends = func(child int, _, _ string, ids []string, _ *model.Window, _ *string) int {
		return 1 + child*(len(ids)+1)
	}
	c.Mutation.SubmitScores = func(child int, inputs []model.ScoreInput) int {
		return submitScoresComplexity(child, len(inputs))
	}
	c.Query.ScoreEvents = func(child int, _, _ string, first *int, _ *string) int {
		return 1 + child*clampN(deref(first, 100), leaderboard.MaxScoreEvents)
	}
	c.Subscription.TopUpdates = func(child int, _ string, first *int, _ *model.Window, _ *string) int {
		return 1 + child*clampN(deref(first, 10), MaxLiveFirst)
	}
	c.TopUpdate.Entries = func(child int) int { return 1 + child*10 }
	return cfg
}

// argComplexity lists the fields whose complexity function (set in schemaConfig) reads their arguments; every other
// field costs the same whatever the variables. TestArgComplexity holds the list to the functions NewSchema sets.
var argComplexity = map[string]bool{"Query.top": true, "Query.aroundMe": true, "Query.friends": true,
	"Mutation.submitScores": true, "Subscription.topUpdates": true, "Query.scoreEvents": true}

// submitScoresComplexity is the complexity of a submitScores of n inputs whose selection costs child: the
// selection once per input. The complexity limit counts the inputs without unmarshalling them (complexity.go).
func submitScoresComplexity(child, n int) int { return saturatingAdd(1, saturatingMul(child, n)) }

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// clampN keeps a size argument within [1, hi] for complexity: out-of-range values are rejected by the resolver
// anyway, and must not overflow the estimate.
func clampN(n, hi int) int { return max(1, min(n, hi)) }
