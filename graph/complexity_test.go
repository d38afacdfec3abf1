package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
)

// The complexity limit counts submitScores' inputs without unmarshalling them: the same figure as the generated
// complexity function, which unmarshals them into the typed arguments (the oracle), for lists sent as variables
// and written in the document, under fragments too.
func TestSubmitScoresComplexityCountsTheList(t *testing.T) {
	es := NewSchema(&Resolver{})
	schema := es.Schema()
	input := func(i int) string {
		return fmt.Sprintf(`{"board":"b","playerId":"p%d","score":%d.5,"eventId":"e%d","metadata":{"k":[%d]}}`, i, i, i, i)
	}
	for _, n := range []int{0, 1, 3, 100} {
		items := make([]string, n)
		for i := range items {
			items[i] = input(i)
		}
		list := "[" + strings.Join(items, ",") + "]"
		literal := strings.NewReplacer(`"board"`, "board", `"playerId"`, "playerId", `"score"`, "score",
			`"eventId"`, "eventId", `"metadata"`, "metadata", `"k"`, "k").Replace(list)
		for _, doc := range []struct{ src, vars string }{
			{`mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`, `{"in":` + list + `}`},
			{`mutation($in: [ScoreInput!]!) { a: submitScores(inputs: $in) { ...R entry { rank score playerId } } b: submitScores(inputs: $in) { ...R } }
			  fragment R on ScoreResult { updated duplicate previousRank }`, `{"in":` + list + `}`},
			{`mutation { submitScores(inputs: ` + literal + `) { updated entry { rank } } }`, `{}`},
		} {
			q, err := gqlparser.LoadQueryWithRules(schema, doc.src, nil)
			if err != nil {
				t.Fatalf("%s: %v", doc.src, err)
			}
			op := q.Operations[0]
			var raw map[string]any
			dec := json.NewDecoder(strings.NewReader(doc.vars))
			dec.UseNumber()
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			vars, verr := validator.VariableValues(schema, op, raw)
			if verr != nil {
				t.Fatal(verr)
			}
			ctx := context.Background()
			got := (&complexityWalker{es: es, vars: vars}).selectionSet(ctx, op.SelectionSet)

			// The oracle: each root field's cost from the generated function, its selection's from the walker.
			want := 0
			for _, sel := range op.SelectionSet {
				f := sel.(*ast.Field)
				child := (&complexityWalker{es: es, vars: vars}).selectionSet(ctx, f.SelectionSet)
				c, ok := es.Complexity(ctx, "Mutation", "submitScores", child, f.ArgumentMap(vars))
				if !ok {
					t.Fatalf("%s with %d inputs: the generated complexity function did not take the arguments",
						doc.src, n)
				}
				want += c
			}
			if got != want {
				t.Errorf("%d inputs, %s: complexity %d, the generated function's %d", n, doc.src, got, want)
			}

			// And the limit applies to it.
			limit := &ComplexityLimit{Max: want}
			if err := limit.Validate(es); err != nil {
				t.Fatal(err)
			}
			oc := &graphql.OperationContext{Doc: q, Operation: op, Variables: vars}
			if err := limit.MutateOperationContext(ctx, oc); err != nil {
				t.Errorf("%d inputs at a limit of exactly %d: %v", n, want, err)
			}
			if limit.Max = want - 1; limit.Max < 1 {
				continue // 0: no limit
			}
			if err := limit.MutateOperationContext(ctx, oc); err == nil || err.Extensions["code"] != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Errorf("%d inputs at a limit of %d: %v, want COMPLEXITY_LIMIT_EXCEEDED", n, want-1, err)
			}
		}
	}
	if c := submitScoresComplexity(math.MaxInt/2, 3); c != math.MaxInt {
		t.Errorf("a huge selection times 3 inputs: %d, want the saturated %d", c, math.MaxInt)
	}
}
