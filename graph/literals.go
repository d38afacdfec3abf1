package graph

import (
	"context"
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// ExactFloats is a gqlgen extension that has the score rule judge every Float of an operation by the decimal the
// client wrote, not by its float64 rounding (9007199254740993 would arrive as 2^53):
//   - literals (arguments, input object fields, list items, variable defaults) are checked with
//     leaderboard.CheckScoreText while their text is still known, before gqlgen parses them to float64;
//   - a Float variable at the top level (`$s: Float!`) gets its JSON text (json.Number) back after gqlparser's
//     coercion turned it into a float64, so the Float unmarshaler checks it as it checks a Float nested in an
//     input object or a list, which keeps its text (model.UnmarshalFloat, model.UnmarshalScore).
type ExactFloats struct{}

var (
	_ graphql.HandlerExtension          = ExactFloats{}
	_ graphql.OperationParameterMutator = ExactFloats{}
	_ graphql.OperationContextMutator   = ExactFloats{}
)

func (ExactFloats) ExtensionName() string                   { return "ExactFloats" }
func (ExactFloats) Validate(graphql.ExecutableSchema) error { return nil }

// rawVariables names the request's variables as decoded, kept between the two mutators in the operation's stats.
const rawVariables = "ExactFloats.variables"

// MutateOperationParameters keeps the variables as the transport decoded them (numbers as json.Number) for
// MutateOperationContext: gqlparser's coercion, which runs between the two, rounds top-level Float variables.
func (ExactFloats) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if len(p.Variables) > 0 && graphql.HasOperationContext(ctx) {
		graphql.GetOperationContext(ctx).Stats.SetExtension(rawVariables, p.Variables)
	}
	return nil
}

// exactFloatVariables puts the JSON text of op's top-level Float variables back into coerced, the variables
// gqlparser's validator.VariableValues made of raw. Nested Floats keep their text through it.
func exactFloatVariables(op *ast.OperationDefinition, raw, coerced map[string]any) {
	if len(raw) == 0 || op == nil {
		return
	}
	for _, vd := range op.VariableDefinitions {
		if vd.Type.Elem != nil || vd.Type.NamedType != "Float" {
			continue
		}
		if n, ok := raw[vd.Variable].(json.Number); ok {
			coerced[vd.Variable] = n
		}
	}
}

// MutateOperationContext runs after validation, which has set the expected type of every value.
func (ExactFloats) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Doc == nil {
		return nil
	}
	if raw, ok := oc.Stats.GetExtension(rawVariables).(map[string]any); ok && oc.Variables != nil {
		exactFloatVariables(oc.Operation, raw, oc.Variables)
	}
	var bad error
	var check func(v *ast.Value)
	check = func(v *ast.Value) {
		if v == nil || bad != nil {
			return
		}
		switch v.Kind {
		case ast.IntValue, ast.FloatValue:
			if v.ExpectedType != nil && v.ExpectedType.Name() == "Float" {
				bad = leaderboard.CheckScoreText(v.Raw)
			}
		case ast.ListValue, ast.ObjectValue:
			for _, c := range v.Children {
				check(c.Value)
			}
		}
	}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				for _, a := range s.Arguments {
					check(a.Value)
				}
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			}
		}
	}
	for _, op := range oc.Doc.Operations {
		for _, vd := range op.VariableDefinitions {
			check(vd.DefaultValue)
		}
		walk(op.SelectionSet)
	}
	for _, f := range oc.Doc.Fragments {
		walk(f.SelectionSet) // each fragment once, however often it is spread
	}
	if bad != nil {
		err := gqlerror.Errorf("%s", leaderboard.ErrorMessage(bad))
		err.Extensions = map[string]any{"code": string(leaderboard.Invalid)}
		return err
	}
	return nil
}
