package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Costs of introspection in the complexity limit. gqlgen's own walker leaves __schema out entirely, so a request
// of thousands of aliased __schema selections passed any limit and answered tens of megabytes. A whole-schema
// introspection answers about a hundred kilobytes here, so it counts as much as a page of a thousand rows.
const (
	SchemaIntrospectionCost = 2000 // __schema, plus its selection
	TypeIntrospectionCost   = 100  // __type(name:), plus its selection
)

// The extensions.reason of the limits' errors (their code is BAD_USER_INPUT, see ErrorPresenter).
const (
	ReasonComplexity = "COMPLEXITY_LIMIT_EXCEEDED"
	ReasonFields     = "FIELD_LIMIT_EXCEEDED"
	ReasonDepth      = "DEPTH_LIMIT_EXCEEDED"
	// ReasonResponseSize: an answer over MAX_RESPONSE_BYTES, withheld. The operation ran, so it is not a
	// protocol error: HTTP 200, as for any error of an operation that ran.
	ReasonResponseSize = "RESPONSE_TOO_LARGE"
)

// A document over a limit is refused before it runs, as one that does not validate: gqlgen's HTTP transports
// then answer 422 (400 to application/graphql-response+json). Unregistered, they answered 200 with the error, as
// if the operation had run.
func init() {
	for _, reason := range []string{ReasonComplexity, ReasonFields, ReasonDepth} {
		errcode.RegisterErrorType(reason, errcode.KindProtocol)
	}
}

// ComplexityLimit is a gqlgen extension that bounds what an operation may cost:
//   - Complexity: list fields count once per possible row (the schema's complexity functions, NewSchema), every
//     other field once, introspection as above; more than Max is COMPLEXITY_LIMIT_EXCEEDED. Fragments are
//     measured once each, however often they are spread (gqlgen's walker recursed into every spread, so a 1.3 KB
//     document of 40 fragments that each spread the next twice took hours).
//   - Fields: at most MaxFields field selections (aliases included) in the whole document. 0: no bound.
//   - Answer: an answer of a query over MaxResponseBytes (its data and errors as encoded) is withheld, replaced by
//     a RESPONSE_TOO_LARGE error. 0: no bound. A mutation's answer never is: its writes are done.
//
// Complexity and fields are checked before the operation runs, the answer once it has. In a batch (Budget), the
// batch's operations share the three bounds. All answer BAD_USER_INPUT with the reason in extensions.reason;
// the first two as a document refused before it runs (init).
type ComplexityLimit struct {
	Max              int
	MaxFields        int
	MaxResponseBytes int
	es               graphql.ExecutableSchema
}

var (
	_ graphql.HandlerExtension        = (*ComplexityLimit)(nil)
	_ graphql.OperationContextMutator = (*ComplexityLimit)(nil)
	_ graphql.ResponseInterceptor     = (*ComplexityLimit)(nil)
)

func (*ComplexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *ComplexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	return nil
}

// MutateOperationContext runs after validation (fragment cycles are refused by then, so the walk ends).
func (c *ComplexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Doc == nil {
		return nil
	}
	fields := 0
	if c.MaxFields > 0 {
		if fields = countFields(oc.Doc); fields > c.MaxFields {
			return limitError(ReasonFields,
				fmt.Sprintf("the document selects %d fields; at most %d are allowed", fields, c.MaxFields))
		}
	}
	complexity := 0
	if op := oc.Operation; op != nil && c.Max > 0 {
		w := &complexityWalker{es: c.es, vars: oc.Variables}
		if complexity = w.selectionSet(ctx, op.SelectionSet); complexity > c.Max {
			return limitError(ReasonComplexity,
				fmt.Sprintf("operation has complexity %d, which exceeds the limit of %d", complexity, c.Max))
		}
	}
	return chargeDocument(ctx, complexity, fields)
}

// InterceptResponse withholds an answer over the bound (see ComplexityLimit). It is the innermost response
// interceptor, so the others (metrics) see what the client gets.
func (c *ComplexityLimit) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil || (c.MaxResponseBytes <= 0 && meterFrom(ctx) == nil) {
		return resp
	}
	if err := chargeAnswer(ctx, answerBytes(resp), c.MaxResponseBytes, isMutation(ctx)); err != nil {
		ectx := graphql.WithFreshResponseContext(ctx) // the presenter codes it, and it alone is the answer's error
		graphql.AddError(ectx, err)
		return &graphql.Response{Errors: graphql.GetErrors(ectx)}
	}
	return resp
}

// answerBytes is the size of an answer's data and errors as they are sent (the rest of the envelope is a few
// bytes). Errors are rare, so encoding them once more to count them costs little.
func answerBytes(resp *graphql.Response) int {
	n := len(resp.Data)
	if len(resp.Errors) > 0 {
		b, _ := json.Marshal(resp.Errors)
		n += len(b)
	}
	return n
}

func limitError(reason, msg string) *gqlerror.Error {
	err := gqlerror.Errorf("%s", msg)
	err.Extensions = map[string]any{"code": reason}
	return err
}

// countFields counts the field selections written in a document (operations and fragments, each once).
func countFields(doc *ast.QueryDocument) int {
	var n int
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				n++
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
	return n
}

// complexityWalker computes an operation's complexity as gqlgen's complexity.Calculate does (custom functions
// from the schema, 1 + children otherwise, saturating sums), with each fragment's cost remembered and
// introspection counted.
type complexityWalker struct {
	es   graphql.ExecutableSchema
	vars map[string]any
	memo map[string]int // fragment name -> complexity of its selection set
}

func (w *complexityWalker) selectionSet(ctx context.Context, set ast.SelectionSet) int {
	total := 0
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			total = saturatingAdd(total, w.field(ctx, s))
		case *ast.InlineFragment:
			total = saturatingAdd(total, w.selectionSet(ctx, s.SelectionSet))
		case *ast.FragmentSpread:
			if s.Definition == nil {
				continue
			}
			n, ok := w.memo[s.Name]
			if !ok {
				n = w.selectionSet(ctx, s.Definition.SelectionSet)
				if w.memo == nil {
					w.memo = map[string]int{} // made for the first spread: most documents have none
				}
				w.memo[s.Name] = n
			}
			total = saturatingAdd(total, n)
		}
	}
	return total
}

func (w *complexityWalker) field(ctx context.Context, f *ast.Field) int {
	child := 0
	if len(f.SelectionSet) > 0 {
		child = w.selectionSet(ctx, f.SelectionSet)
	}
	switch {
	case f.Name == "__schema":
		return saturatingAdd(SchemaIntrospectionCost, child)
	case f.Name == "__type":
		return saturatingAdd(TypeIntrospectionCost, child)
	}
	if f.ObjectDefinition != nil && !strings.HasPrefix(f.ObjectDefinition.Name, "__") {
		args := f.ArgumentMap(w.vars)
		if f.Name == "submitScores" && f.ObjectDefinition.Name == "Mutation" {
			// Counted from the list as sent: the generated function unmarshals every input into the typed
			// arguments first, only to count them (a tenth of the server's CPU for a submitScores of 100).
			if inputs, ok := args["inputs"].([]any); ok {
				return submitScoresComplexity(child, len(inputs))
			}
		}
		if n, ok := w.es.Complexity(ctx, f.ObjectDefinition.Name, f.Name, child, args); ok && n >= 1 {
			return n
		}
	}
	return saturatingAdd(1, child)
}

// saturatingMul multiplies non-negative complexities without overflowing.
func saturatingMul(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > int(^uint(0)>>1)/b {
		return int(^uint(0) >> 1)
	}
	return a * b
}

// saturatingAdd adds non-negative complexities without overflowing.
func saturatingAdd(a, b int) int {
	if a < 0 {
		a = 0
	}
	if b < 0 {
		b = 0
	}
	if c := a + b; c >= a {
		return c
	}
	return int(^uint(0) >> 1)
}
