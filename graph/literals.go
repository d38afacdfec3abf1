package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// FloatLiterals is a gqlgen extension that checks every Float literal of an operation (arguments, input object
// fields, list items, variable defaults) with leaderboard.CheckScoreText while its exact text is still known:
// gqlgen parses literals to float64 before the Float unmarshaler sees them, and 9007199254740993 would arrive
// as 2^53.
type FloatLiterals struct{}

var (
	_ graphql.HandlerExtension        = FloatLiterals{}
	_ graphql.OperationContextMutator = FloatLiterals{}
)

func (FloatLiterals) ExtensionName() string                   { return "FloatLiterals" }
func (FloatLiterals) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext runs after validation, which has set the expected type of every value.
func (FloatLiterals) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Doc == nil {
		return nil
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
