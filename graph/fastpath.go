package graph

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
)

// The fast path runs a request whose query text (and operation name) gqlgen has already run on the prepared path
// (prepared.go) without the work gqlgen repeats for every request: it takes the document gqlgen parsed and
// validated then, instead of decoding the transport's JSON into generic maps, looking the query up, checking the
// text and running the document's limits again. What depends on the request itself is done as gqlgen does it,
// with gqlgen's and this package's own code: the variables are coerced by gqlparser's validator.VariableValues,
// the limits that read variables (the complexity limit) run again, and the operation is dispatched as
// executor.DispatchOperation dispatches it (response middleware, root field middleware, error presenter, recover
// function) to the prepared response handler. A request it cannot take (another document, variables that do not
// coerce, a limit exceeded) is left to gqlgen, before anything ran. TestFastPathMatchesGqlgen holds the two byte
// for byte.

// FastPathConfig is what gqlgen's executor is configured with, for the fast path to dispatch as it does.
type FastPathConfig struct {
	// Limits are the operation context mutators whose outcome depends on the variables (the complexity limit);
	// the fast path runs them for every request. Those that read only the document passed when gqlgen ran it.
	Limits []graphql.OperationContextMutator
	// RootMiddleware is the executor's root field middleware (AroundRootFields); nil: none.
	RootMiddleware graphql.RootFieldMiddleware
	// Response is the executor's response middleware (the extensions' InterceptResponse, outermost first).
	Response []graphql.ResponseInterceptor
	// ErrorPresenter and Recover are the executor's (SetErrorPresenter, SetRecoverFunc).
	ErrorPresenter graphql.ErrorPresenterFunc
	Recover        graphql.RecoverFunc
	// Introspection: the executor allows introspection (extension.Introspection).
	Introspection bool
}

// FastPath runs requests of documents gqlgen ran on the prepared path before (see above). Safe for concurrent use.
type FastPath struct {
	s   liveSchema
	cfg FastPathConfig
	ops atomic.Int64
}

// NewFastPath returns the fast path of es (a schema from NewSchema with prepared results; nil otherwise).
func NewFastPath(es graphql.ExecutableSchema, cfg FastPathConfig) *FastPath {
	s, ok := es.(liveSchema)
	if !ok || s.plans == nil {
		return nil
	}
	return &FastPath{s: s, cfg: cfg}
}

// Operations returns how many operations the fast path ran (0 on a nil FastPath).
func (f *FastPath) Operations() int64 {
	if f == nil {
		return 0
	}
	return f.ops.Load()
}

// Known reports whether a query text and operation name are a document the fast path may run: a cheap first
// look, before the request's variables are decoded.
func (f *FastPath) Known(query, operationName string) bool {
	return f.s.plans.request(query, operationName) != nil
}

// Execute runs the request params on the fast path and returns gqlgen's response for it, or false (nothing ran)
// when gqlgen must take it. The caller writes the response as gqlgen's POST transport does.
func (f *FastPath) Execute(ctx context.Context, params *graphql.RawParams) (*graphql.Response, bool) {
	req := f.s.plans.request(params.Query, params.OperationName)
	if req == nil || len(params.Extensions) > 0 {
		return nil, false
	}
	vars, ok := coerceVariables(f.s.Schema(), req.op, params.Variables)
	if !ok {
		var err error
		if vars, err = validator.VariableValues(f.s.Schema(), req.op, params.Variables); err != nil {
			return nil, false
		}
	}
	exactFloatVariables(req.op, params.Variables, vars) // as gqlgen's run of ExactFloats
	opCtx := &graphql.OperationContext{
		RawQuery:               params.Query,
		Variables:              vars,
		OperationName:          params.OperationName,
		Doc:                    req.doc,
		Headers:                params.Headers,
		Operation:              req.op,
		DisableIntrospection:   !f.cfg.Introspection,
		RecoverFunc:            f.cfg.Recover,
		ResolverMiddleware:     func(ctx context.Context, next graphql.Resolver) (any, error) { return next(ctx) },
		RootResolverMiddleware: f.rootMiddleware,
	}
	ctx = graphql.WithOperationContext(ctx, opCtx)
	// A metered request (a batch's operation, one the top cache measures) runs the limits always: they charge
	// its cost.
	runLimits := req.limits || meterFrom(ctx) != nil
	for _, m := range f.cfg.Limits {
		if !runLimits {
			break
		}
		if err := m.MutateOperationContext(ctx, opCtx); err != nil {
			return nil, false
		}
	}
	// As executor.DispatchOperation, with liveSchema.Exec's choice of the prepared path (which adds no error
	// while it makes the handler).
	responses := f.s.prepared(opCtx)
	if responses == nil {
		return nil, false
	}
	f.ops.Add(1)
	ctx = graphql.WithResponseContext(ctx, f.cfg.ErrorPresenter, f.cfg.Recover)
	return f.response(ctx, 0, func(ctx context.Context) *graphql.Response {
		resp := responses(ctx)
		if resp == nil {
			return nil
		}
		resp.Errors = append(resp.Errors, graphql.GetErrors(ctx)...)
		resp.Extensions = graphql.GetExtensions(ctx)
		return resp
	}), true
}

// response runs the response interceptors from the i-th on, around next.
func (f *FastPath) response(ctx context.Context, i int, next graphql.ResponseHandler) *graphql.Response {
	if i == len(f.cfg.Response) {
		return next(ctx)
	}
	return f.cfg.Response[i].InterceptResponse(ctx, func(ctx context.Context) *graphql.Response {
		return f.response(ctx, i+1, next)
	})
}

func (f *FastPath) rootMiddleware(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	if f.cfg.RootMiddleware == nil {
		return next(ctx)
	}
	return f.cfg.RootMiddleware(ctx, next)
}

// preparedRequest is a document gqlgen ran on the prepared path, as the fast path runs it again.
type preparedRequest struct {
	doc *ast.QueryDocument
	op  *ast.OperationDefinition
	// limits: the operation's complexity reads its variables (a root field in argComplexity), so the limits run
	// for every request; otherwise the complexity is the one gqlgen accepted.
	limits bool
}

// requestKey names a request's document: its query text and operation name.
type requestKey struct{ query, operationName string }

// fastRequests remembers the documents gqlgen ran on the prepared path, by query text and operation name, with
// the same bounds as the plans (at most maxPreparedPlans, documents up to maxPreparedSource bytes).
type fastRequests struct {
	mu sync.RWMutex
	m  map[requestKey]*preparedRequest
}

// request returns the document of a query text and operation name, nil when gqlgen has not run it on the
// prepared path.
func (c *preparedPlans) request(query, operationName string) *preparedRequest {
	c.reqs.mu.RLock()
	r := c.reqs.m[requestKey{query, operationName}]
	c.reqs.mu.RUnlock()
	return r
}

// remember keeps the document of an operation gqlgen is running on the prepared path: it passed parsing,
// validation and every limit, with these variables.
func (c *preparedPlans) remember(opCtx *graphql.OperationContext) {
	if len(opCtx.RawQuery) > maxPreparedSource || opCtx.Doc == nil {
		return
	}
	k := requestKey{opCtx.RawQuery, opCtx.OperationName}
	c.reqs.mu.RLock()
	_, ok := c.reqs.m[k]
	c.reqs.mu.RUnlock()
	if ok {
		return
	}
	c.reqs.mu.Lock()
	if c.reqs.m == nil || len(c.reqs.m) >= maxPreparedPlans {
		c.reqs.m = map[requestKey]*preparedRequest{}
	}
	r := &preparedRequest{doc: opCtx.Doc, op: opCtx.Operation}
	for _, sel := range opCtx.Operation.SelectionSet { // prepared selections below the root take no arguments
		if f, ok := sel.(*ast.Field); ok && f.ObjectDefinition != nil {
			r.limits = r.limits || argComplexity[f.ObjectDefinition.Name+"."+f.Name]
		}
	}
	c.reqs.m[k] = r
	c.reqs.mu.Unlock()
}

// coerceVariables is gqlparser's validator.VariableValues for the variable types of the hot operations: ID and
// String (strings), Int (a JSON integer, as int64), Float (as float64), Boolean, enums (a string naming a value,
// in any case, as VariableValues compares), and input objects of those and of custom scalars. It gives what
// VariableValues gives, or ok false for anything else (another type, a number where an ID belongs, a list, a
// value VariableValues would refuse), and the fast path then leaves the variables to VariableValues. Like
// VariableValues, it returns the input objects it was given. FuzzCoerceVariables holds it to VariableValues.
func coerceVariables(schema *ast.Schema, op *ast.OperationDefinition, vars map[string]any) (map[string]any, bool) {
	out := make(map[string]any, len(op.VariableDefinitions))
	for _, vd := range op.VariableDefinitions {
		if vd.DefaultValue != nil || vd.Definition == nil {
			return nil, false
		}
		v, ok := vars[vd.Variable]
		if !ok {
			if vd.Type.NonNull {
				return nil, false
			}
			continue
		}
		if v == nil {
			if vd.Type.NonNull {
				return nil, false
			}
			out[vd.Variable] = nil
			continue
		}
		if n, isNum := v.(json.Number); isNum { // VariableValues converts a top-level number for Int and Float
			switch vd.Type.NamedType {
			case "Int":
				i, err := n.Int64()
				if err != nil {
					return nil, false
				}
				v = i
			case "Float":
				f, err := n.Float64()
				if err != nil {
					return nil, false
				}
				v = f
			}
		}
		c, ok := coerceValue(schema, vd.Type, v, 0)
		if !ok {
			return nil, false
		}
		out[vd.Variable] = c
	}
	return out, true
}

// coerceValue checks a non-null value against a type as validateVarType does, and returns what it returns.
func coerceValue(schema *ast.Schema, typ *ast.Type, v any, depth int) (any, bool) {
	if depth > 4 {
		return nil, false
	}
	if typ.Elem != nil {
		// A list checks each element, and VariableValues writes what an element coerces to back into the list:
		// every element accepted here coerces to itself, so the list is returned as it came. A single value
		// where a list is expected (coerced to a list of one) is left to VariableValues.
		list, ok := v.([]any)
		if !ok {
			return nil, false
		}
		for _, e := range list {
			if !memberCoerces(schema, typ.Elem, e, depth) {
				return nil, false
			}
		}
		return list, true
	}
	def := schema.Types[typ.NamedType]
	if def == nil {
		return nil, false
	}
	switch def.Kind {
	case ast.Enum:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		for _, ev := range def.EnumValues {
			if strings.EqualFold(s, ev.Name) {
				return s, true
			}
		}
		return nil, false
	case ast.Scalar:
		switch typ.NamedType {
		case "ID", "String":
			s, ok := v.(string)
			return s, ok
		case "Boolean":
			b, ok := v.(bool)
			return b, ok
		case "Int":
			switch x := v.(type) {
			case int64:
				return x, true
			case json.Number:
				if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
					return x, true
				}
			}
			return nil, false
		case "Float":
			switch x := v.(type) {
			case float64:
				return x, true
			case json.Number:
				if _, err := strconv.ParseFloat(string(x), 64); err == nil {
					return x, true
				}
			}
			return nil, false
		}
		if def.BuiltIn {
			return nil, false
		}
		return v, true // custom scalars: their unmarshalers judge, as the operation runs
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		for k := range m {
			if def.Fields.ForName(k) == nil {
				return nil, false // unknown, or __typename
			}
		}
		for _, fd := range def.Fields {
			// A field's value coerces to itself (no top-level conversion inside an object), so the object is
			// what VariableValues returns, as it returns the map it was given. Absent is null here.
			if !memberCoerces(schema, fd.Type, m[fd.Name], depth) {
				return nil, false
			}
		}
		return m, true
	}
	return nil, false
}

// memberCoerces checks an element of a list or a field of an input object: null where its type allows it,
// otherwise a value coerceValue accepts.
func memberCoerces(schema *ast.Schema, typ *ast.Type, v any, depth int) bool {
	if v == nil {
		return !typ.NonNull
	}
	_, ok := coerceValue(schema, typ, v, depth+1)
	return ok
}
