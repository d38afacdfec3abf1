package graph

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
)

// The hot operations' documents as clients write them, and a few more variable types.
var coerceDocs = []string{
	`mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }`,
	`query($b: ID!, $p: ID!, $r: Int, $w: Window, $per: String) { aroundMe(board: $b, playerId: $p, radius: $r, window: $w, period: $per) { rank } }`,
	`query($b: ID!, $p: ID!, $w: Window!) { rank(board: $b, playerId: $p, window: $w) { rank } }`,
	`query($b: ID!, $p: ID!, $f: [ID!]!) { friends(board: $b, playerId: $p, friendIds: $f) { rank } }`,
	`mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
}

// FuzzCoerceVariables: whatever coerceVariables accepts, gqlparser's VariableValues accepts too, with the same
// result; and it accepts what clients send.
func FuzzCoerceVariables(f *testing.F) {
	schema := NewSchema(&Resolver{}).Schema()
	var ops []*ast.OperationDefinition
	for _, src := range coerceDocs {
		doc, err := gqlparser.LoadQueryWithRules(schema, src, nil)
		if err != nil {
			f.Fatalf("%s: %v", src, err)
		}
		ops = append(ops, doc.Operations[0])
	}
	decode := func(b []byte) (map[string]any, bool) {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		return m, dec.Decode(&m) == nil
	}
	accepted := []struct {
		op   int
		vars string
	}{
		{0, `{"in":{"board":"b","playerId":"p","score":1.5}}`},
		{0, `{"in":{"board":"b","playerId":"p","score":-2,"eventId":"e","displayName":null,"metadata":{"k":[1]},"achievedAt":"2030-01-01T00:00:00Z"}}`},
		{1, `{"b":"b","p":"p","r":3,"w":"DAILY","per":"2030-01-01"}`},
		{1, `{"b":"b","p":"p","r":null,"extra":[1,2]}`},
		{2, `{"b":"b","p":"p","w":"weekly"}`},
		{3, `{"b":"b","p":"p","f":["x","y"]}`},
		{3, `{"b":"b","p":"p","f":[]}`},
		{4, `{"in":[{"board":"b","playerId":"p","score":1},{"board":"b","playerId":"q","score":2.5,"eventId":"e","metadata":{"a":[1,null]}}]}`},
	}
	for _, a := range accepted {
		m, _ := decode([]byte(a.vars))
		if _, ok := coerceVariables(schema, ops[a.op], m); !ok {
			f.Fatalf("not accepted: %s for %s", a.vars, coerceDocs[a.op])
		}
		f.Add([]byte(a.vars))
	}
	for _, s := range []string{`{"in":{"board":"b","playerId":"p","score":"1"}}`, `{"in":{"board":1,"playerId":"p","score":1}}`,
		`{"in":{"board":"b","score":1}}`, `{"in":{"board":"b","playerId":"p","score":1,"__typename":"x"}}`,
		`{"b":"b","p":"p","r":1.5}`, `{"b":"b","p":"p","w":"NOPE"}`, `{"b":"b","p":"p","f":["x"]}`, `{"in":[]}`, `{}`, `{"in":[null]}`, `{"b":"b","p":"p","f":[1]}`,
		`{"in":{"board":"b","playerId":"p","score":1}}`, `{"in":[{"board":"b","playerId":"p","score":"x"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, ok := decode(b)
		if !ok {
			return
		}
		for i, op := range ops {
			got, ok := coerceVariables(schema, op, raw)
			if !ok {
				continue
			}
			again, _ := decode(b) // VariableValues writes into the map it is given
			want, err := validator.VariableValues(schema, op, again)
			if err != nil {
				t.Fatalf("%s with %s: coerceVariables accepts, VariableValues refuses: %v", coerceDocs[i], b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s with %s:\n  coerceVariables %#v\n  VariableValues  %#v", coerceDocs[i], b, got, want)
			}
		}
	})
}

// TestArgComplexity: argComplexity names exactly the fields whose complexity function, as schemaConfig sets them,
// takes arguments besides the child complexity.
func TestArgComplexity(t *testing.T) {
	got := map[string]bool{}
	roots := reflect.ValueOf(schemaConfig(&Resolver{}).Complexity)
	for i := range roots.NumField() {
		obj := roots.Field(i)
		if obj.Kind() != reflect.Struct {
			continue
		}
		for j := range obj.NumField() {
			fn := obj.Field(j)
			if fn.Kind() == reflect.Func && !fn.IsNil() && fn.Type().NumIn() > 1 {
				name := roots.Type().Field(i).Name + "." + obj.Type().Field(j).Name
				got[name] = true
			}
		}
	}
	want := map[string]bool{}
	for k := range argComplexity {
		typ, field, _ := strings.Cut(k, ".")
		want[typ+"."+strings.ToUpper(field[:1])+field[1:]] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fields with argument-reading complexity functions %v, argComplexity %v", got, want)
	}
}
