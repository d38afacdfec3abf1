package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"

	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/pubsub"
)

// The shared rendering of topUpdates gives, for any selection (aliases, fragments, directives, __typename, the
// version twice), exactly the bytes gqlgen gives for the same update and version once its transport has marshaled
// them (compact, HTML-escaped: names with <, >, & and U+2028, metadata with spaces).
func TestSharedRenderingMatchesGqlgen(t *testing.T) {
	s := NewSchema(&Resolver{}).(liveSchema)
	queries := []string{
		`subscription { topUpdates(board: "b") { board window period version snapshot size removed entries { playerId displayName rank tieRank approximate score topPercent updatedAt metadata } } }`,
		`subscription($inc: Boolean!) { t: topUpdates(board: "b") { v1: version ...F entries { __typename p: playerId score rank } removed size board @include(if: $inc) window @skip(if: $inc) } }
		 fragment F on TopUpdate { version snapshot __typename ... on TopUpdate { period } }`,
		`subscription { topUpdates(board: "b") { entries { rank tieRank t2: tieRank } } }`,
	}
	name := "Ada \"the\" 1st <b>&amp;\u2028"
	updates := []*pubsub.TopUpdate{
		{Board: "b", Window: leaderboard.AllTime, Period: "all", Version: 1, Snapshot: true, Size: 2, Entries: []leaderboard.Entry{
			{PlayerID: "a", DisplayName: &name, Rank: 1, TieRank: 1, Score: 1.5, TopPercent: 50, UpdatedAt: time.Unix(1764450000, 0).UTC(),
				Metadata: json.RawMessage(`{"k": [1, 2], "html": "<i>&"}`)},
			{PlayerID: "b", Rank: 2, TieRank: 2, Score: -3e-7, TopPercent: 100, Approximate: true, UpdatedAt: time.Unix(1764450001, 0).UTC()},
		}},
		{Board: "b", Window: leaderboard.Daily, Period: "2026-11-29", Version: 123456, Removed: []string{"x", "y"}, Size: 12},
	}
	for _, q := range queries {
		doc, errs := gqlparser.LoadQueryWithRules(s.Schema(), q, nil)
		if errs != nil {
			t.Fatal(errs)
		}
		opCtx := &graphql.OperationContext{RawQuery: q, Variables: map[string]any{"inc": true}, Doc: doc,
			RecoverFunc:        graphql.DefaultRecover,
			ResolverMiddleware: func(ctx context.Context, next graphql.Resolver) (any, error) { return next(ctx) },
			Operation:          doc.Operations[0]}
		ctx := graphql.WithOperationContext(context.Background(), opCtx)
		ctx = graphql.WithResponseContext(ctx, graphql.DefaultErrorPresenter, graphql.DefaultRecover)
		op := newGeneratedOperation(s.ExecutableSchema, opCtx, make(chan graphql.DeferredResult))
		fields := graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, subscriptionRoot)
		sel := fields[0].Selections
		for _, u := range updates {
			var want, got bytes.Buffer
			op.subscriptionTopUpdatesMarshal(ctx, sel, topUpdateModel(u, u.Version)).MarshalGQL(&want)
			parts := renderShared(ctx, op, sel, u)
			if len(parts) > 0 && parts[0] == 0 {
				t.Fatalf("%s: rendering could not be shared", q)
			}
			versioned{parts: parts, version: u.Version}.MarshalGQL(&got)
			sent, err := json.Marshal(json.RawMessage(want.Bytes())) // what the transport makes of gqlgen's data
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sent, got.Bytes()) {
				t.Fatalf("query %s\n want %s\n  got %s", q, sent, got.Bytes())
			}
		}
	}
}
