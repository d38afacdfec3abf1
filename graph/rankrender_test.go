package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// BenchmarkRankUpdateRender measures the rendering of one later rankUpdates entry on a streamed connection
// (streamRankUpdates): the generated marshaler, as before, and the prepared results' encoder, for the whole Entry
// selection. Each first checks that both give the same bytes.
func BenchmarkRankUpdateRender(b *testing.B) {
	es := NewExecutableSchema(Config{Resolvers: &Resolver{}})
	ctx := graphql.StartOperationTrace(context.Background())
	rc, err := executor.New(es).CreateOperationContext(ctx, &graphql.RawParams{Query: `subscription {
		rankUpdates(board: "b", playerId: "p") { __typename playerId displayName rank tieRank approximate score
		topPercent updatedAt metadata } }`})
	if err != nil {
		b.Fatal(err)
	}
	ctx = graphql.WithOperationContext(ctx, rc)
	op := newGeneratedOperation(es, rc, nil)
	field := rc.Operation.SelectionSet[0].(*ast.Field)
	name := "Ada <b>"
	e := &leaderboard.Entry{PlayerID: "player-0042", DisplayName: &name, Rank: 1234, TieRank: 1230, Score: 98765.5,
		TopPercent: 12.34, UpdatedAt: time.Unix(1_800_000_000, 0).UTC(), Metadata: json.RawMessage(`{"team":"red"}`)}
	var buf bytes.Buffer
	generated := func(dst []byte) []byte {
		buf.Reset()
		op.subscriptionRankUpdatesMarshal(ctx, field.SelectionSet, e).MarshalGQL(&buf)
		return appendWire(dst, buf.Bytes())
	}
	plan, ok := compileSelection(field.SelectionSet, entrySelKinds)
	if !ok {
		b.Fatal("the selection does not compile")
	}
	var enc []byte
	encoded := func(dst []byte) []byte {
		var ok bool
		if enc, ok = appendEntry(enc[:0], plan, e); !ok {
			b.Fatal("not encoded")
		}
		return appendWire(dst, enc)
	}
	if g, p := generated(nil), encoded(nil); !bytes.Equal(g, p) {
		b.Fatalf("generated %s\n  encoded %s", g, p)
	}
	for _, c := range []struct {
		name   string
		render func([]byte) []byte
	}{{"generated", generated}, {"encoder", encoded}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				out = c.render(out[:0])
			}
		})
	}
}
