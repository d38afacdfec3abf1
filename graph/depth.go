package graph

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// DepthLimit is a gqlgen extension that rejects operations whose selections nest deeper than Max fields
// (fragments and inline fragments count by the fields inside them). The contract's deepest useful query is
// about 4 levels; GraphiQL's introspection query is about 12.
type DepthLimit struct{ Max int }

var (
	_ graphql.HandlerExtension        = DepthLimit{}
	_ graphql.OperationContextMutator = DepthLimit{}
)

func (DepthLimit) ExtensionName() string                   { return "DepthLimit" }
func (DepthLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext runs after validation, which has rejected fragment cycles, so the walk ends.
func (d DepthLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if d.Max <= 0 || oc.Operation == nil {
		return nil
	}
	w := depthWalker{memo: map[fragmentAt]int{}}
	if depth := w.depth(oc.Operation.SelectionSet, d.Max+1); depth > d.Max {
		return limitError(ReasonDepth,
			fmt.Sprintf("the query is nested %d levels deep or more; at most %d are allowed", depth, d.Max))
	}
	return nil
}

// depthWalker measures selection depth, remembering each fragment's depth so that fragments spread many times
// (a -> b twice -> c twice ...) are walked once per remaining limit, not exponentially often.
type depthWalker struct{ memo map[fragmentAt]int }

type fragmentAt struct {
	name  string
	limit int
}

// depth returns the nesting depth of set, stopping at limit so huge documents cost little.
func (w depthWalker) depth(set ast.SelectionSet, limit int) int {
	if limit <= 0 {
		return 0
	}
	deepest := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			d = 1
			if len(s.SelectionSet) > 0 {
				d += w.depth(s.SelectionSet, limit-1)
			}
		case *ast.InlineFragment:
			d = w.depth(s.SelectionSet, limit)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				key := fragmentAt{s.Name, limit}
				var ok bool
				if d, ok = w.memo[key]; !ok {
					d = w.depth(s.Definition.SelectionSet, limit)
					w.memo[key] = d
				}
			}
		default:
			panic(fmt.Sprintf("unknown selection %T", sel))
		}
		deepest = max(deepest, d)
		if deepest >= limit {
			return deepest
		}
	}
	return deepest
}
