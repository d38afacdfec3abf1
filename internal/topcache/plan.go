package topcache

import (
	"encoding/json"
	"strconv"

	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// topPlan is a parsed document: its operations in order, each with its plan (nil: not a top-only query).
type topPlan struct {
	names []string
	ops   []*topOperation
}

// planTopQuery parses a query string; nil when it does not parse or has no top-only query operation. first is
// top's default `first`.
func planTopQuery(query string, first int) *topPlan {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil || len(doc.Operations) == 0 {
		return nil
	}
	p := &topPlan{}
	found := false
	for _, op := range doc.Operations {
		tp := planTopOperation(op, first)
		found = found || tp != nil
		p.names = append(p.names, op.Name)
		p.ops = append(p.ops, tp)
	}
	if !found {
		return nil
	}
	return p
}

// operation picks the executed operation exactly like gqlgen (ast.OperationList.ForName).
func (p *topPlan) operation(name string) *topOperation {
	if name == "" && len(p.ops) == 1 {
		return p.ops[0]
	}
	for i, n := range p.names {
		if n == name {
			return p.ops[i]
		}
	}
	return nil
}

// topOperation is a query whose root selections are all top fields, with where each argument comes from.
type topOperation struct {
	first    int // top's default first
	fields   []topArgs
	defaults map[string]*ast.Value // variable -> its default value (nil: none)
}

// topArgs holds a top field's arguments as written (nil: not given).
type topArgs struct{ board, first, offset, window, period *ast.Value }

// topRead is one list a request reads: ranks offset+1 .. offset+first of view.
type topRead struct {
	view          leaderboard.View
	offset, first int
}

func planTopOperation(op *ast.OperationDefinition, first int) *topOperation {
	if op.Operation != ast.Query || len(op.Directives) > 0 || len(op.SelectionSet) == 0 {
		return nil
	}
	t := &topOperation{first: first, defaults: map[string]*ast.Value{}}
	for _, vd := range op.VariableDefinitions {
		if len(vd.Directives) > 0 {
			return nil
		}
		t.defaults[vd.Variable] = vd.DefaultValue
	}
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || f.Name != "top" || len(f.Directives) > 0 {
			return nil // fragments at the root, other fields, @skip/@include
		}
		var a topArgs
		for _, arg := range f.Arguments {
			var slot **ast.Value
			switch arg.Name {
			case "board":
				slot = &a.board
			case "first":
				slot = &a.first
			case "offset":
				slot = &a.offset
			case "window":
				slot = &a.window
			case "period":
				slot = &a.period
			default:
				return nil
			}
			if *slot != nil || arg.Value == nil {
				return nil
			}
			*slot = arg.Value
		}
		if a.board == nil {
			return nil
		}
		t.fields = append(t.fields, a)
	}
	return t
}

// reads evaluates the arguments with the request's variables as gqlgen would, with the schema's defaults
// (t.first, offset 0; window and period: the board's). nil when a value is not of the plain kind a valid
// request has (then gqlgen answers, uncached).
func (t *topOperation) reads(vars map[string]any) []topRead {
	out := make([]topRead, 0, len(t.fields))
	for _, f := range t.fields {
		board, ok := t.str(f.board, vars, ast.StringValue)
		if !ok || board == nil {
			return nil
		}
		rd := topRead{view: leaderboard.View{Board: *board}, first: t.first}
		if first, ok := t.integer(f.first, vars); !ok {
			return nil
		} else if first != nil {
			rd.first = *first
		}
		if offset, ok := t.integer(f.offset, vars); !ok {
			return nil
		} else if offset != nil {
			rd.offset = *offset
		}
		if window, ok := t.str(f.window, vars, ast.EnumValue); !ok {
			return nil
		} else if window != nil {
			rd.view.Window = leaderboard.Window(*window)
		}
		if period, ok := t.str(f.period, vars, ast.StringValue); !ok {
			return nil
		} else if period != nil {
			rd.view.Period = *period
		}
		out = append(out, rd)
	}
	return out
}

// value resolves an argument: a literal, or a variable's value, or the variable's default. present is false
// when the argument is absent or null (both mean "the default" for top's optional arguments).
func (t *topOperation) value(v *ast.Value, vars map[string]any) (lit *ast.Value, js any, present bool) {
	if v == nil {
		return nil, nil, false
	}
	if v.Kind != ast.Variable {
		return v, nil, v.Kind != ast.NullValue
	}
	if x, ok := vars[v.Raw]; ok {
		return nil, x, x != nil
	}
	if d := t.defaults[v.Raw]; d != nil {
		return t.value(d, nil)
	}
	return nil, nil, false
}

// str resolves a string-valued argument written as kind (StringValue for ID and String, EnumValue for enums).
func (t *topOperation) str(v *ast.Value, vars map[string]any, kind ast.ValueKind) (*string, bool) {
	lit, js, present := t.value(v, vars)
	switch {
	case !present:
		return nil, true
	case lit != nil:
		if lit.Kind != kind {
			return nil, false
		}
		return &lit.Raw, true
	}
	s, ok := js.(string)
	return &s, ok
}

// integer resolves an Int argument (32-bit; anything else is left to gqlgen).
func (t *topOperation) integer(v *ast.Value, vars map[string]any) (*int, bool) {
	lit, js, present := t.value(v, vars)
	var raw string
	switch {
	case !present:
		return nil, true
	case lit != nil:
		if lit.Kind != ast.IntValue {
			return nil, false
		}
		raw = lit.Raw
	default:
		n, ok := js.(json.Number)
		if !ok {
			return nil, false
		}
		raw = string(n)
	}
	n, err := strconv.ParseInt(raw, 10, 32)
	if err != nil {
		return nil, false
	}
	i := int(n)
	return &i, true
}

// defaultFirst is the default of top's `first` argument in the schema (10 in the contract).
func defaultFirst(schema *ast.Schema) int {
	if schema == nil || schema.Query == nil {
		return 10
	}
	if f := schema.Query.Fields.ForName("top"); f != nil {
		if a := f.Arguments.ForName("first"); a != nil && a.DefaultValue != nil {
			if n, err := strconv.Atoi(a.DefaultValue.Raw); err == nil {
				return n
			}
		}
	}
	return 10
}
