package graph

import (
	"context"
	"math/rand/v2"
	"testing"
)

// A batch's budget against a model of it (running totals, one operation after another): an operation runs when
// its complexity and fields fit what the ones before it left, its answer is kept when its bytes do (a mutation's
// always is). The same outcome whichever way an operation is answered: run once, declined by one path and run by
// the next (charged twice, counted once), or from a cost measured before (the top cache), falling back to a run
// when that does not fit.
func TestBudgetMatchesModel(t *testing.T) {
	type outcome int
	const (
		ran outcome = iota
		refused
		withheld
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		limits := &ComplexityLimit{Max: rng.IntN(400), MaxFields: rng.IntN(40), MaxResponseBytes: rng.IntN(4000)}
		b := limits.NewBudget()
		var model Cost // what the model has charged
		fits := func(used, n, max int) bool { return max == 0 || used+n <= max }
		for op := range 1 + rng.IntN(12) {
			c := Cost{Complexity: rng.IntN(150), Fields: rng.IntN(15), Bytes: 1 + rng.IntN(1500)} // an answer is never empty
			mutation := rng.IntN(5) == 0
			path := rng.IntN(3)

			want := ran
			switch {
			case !fits(model.Complexity, c.Complexity, limits.Max) || !fits(model.Fields, c.Fields, limits.MaxFields):
				want = refused
			case !mutation && !fits(model.Bytes, c.Bytes, limits.MaxResponseBytes):
				want = withheld
			}
			switch want {
			case ran:
				model = Cost{model.Complexity + c.Complexity, model.Fields + c.Fields, model.Bytes + c.Bytes}
			case withheld:
				model = Cost{model.Complexity + c.Complexity, model.Fields + c.Fields, model.Bytes}
			}

			ctx := b.Operation(context.Background())
			run := func() outcome {
				if err := chargeDocument(ctx, c.Complexity, c.Fields); err != nil {
					if r := err.Extensions["code"]; r != ReasonComplexity && r != ReasonFields {
						t.Fatalf("document refused with %v", err)
					}
					return refused
				}
				if err := chargeAnswer(ctx, c.Bytes, limits.MaxResponseBytes, mutation); err != nil {
					if err.Extensions["code"] != ReasonResponseSize {
						t.Fatalf("answer refused with %v", err)
					}
					return withheld
				}
				return ran
			}
			var got outcome
			switch path {
			case 0:
				got = run()
			case 1: // one path measures the document and declines (the fast path), the next runs it all (gqlgen)
				chargeDocument(ctx, c.Complexity, c.Fields)
				got = run()
			case 2: // answered from a cost measured before, else run
				if Charge(ctx, c) {
					got = ran
				} else {
					got = run()
				}
			}
			if got != want {
				t.Fatalf("round %d, operation %d (path %d, mutation %v, cost %+v, limits %+v, model before %+v): "+
					"outcome %d, want %d", round, op, path, mutation, c, *limits, model, got, want)
			}
			if b.used != model {
				t.Fatalf("round %d, operation %d (path %d): budget used %+v, model %+v", round, op, path, b.used, model)
			}
		}
	}
}
