package server

import (
	"os"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// TestSchemaCoversContract fails when the served schema, read by introspection, lacks a type, field, argument,
// input field or enum value of the public contract (testdata/api-contract.graphqls, a copy of
// shared/api-contract.graphqls), or gives one a different type.
func TestSchemaCoversContract(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/api-contract.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	contract, gerr := gqlparser.LoadSchema(&ast.Source{Name: "api-contract.graphqls", Input: string(src)})
	if gerr != nil {
		t.Fatal(gerr)
	}

	s := startServer(t, testConfig(t))
	type typeRef struct {
		Kind   string
		Name   *string
		OfType *typeRef
	}
	type field struct {
		Name string
		Type typeRef
		Args []struct {
			Name string
			Type typeRef
		}
	}
	var out struct {
		Schema struct {
			Types []struct {
				Kind        string
				Name        string
				Fields      []field
				InputFields []field
				EnumValues  []struct{ Name string }
			}
		} `json:"__schema"`
	}
	s.must(t, "", `{ __schema { types { kind name
		fields { name type { ...T } args { name type { ...T } } }
		inputFields { name type { ...T } }
		enumValues { name } } } }
		fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }`, nil, &out)

	var render func(r typeRef) string
	render = func(r typeRef) string {
		switch r.Kind {
		case "NON_NULL":
			return render(*r.OfType) + "!"
		case "LIST":
			return "[" + render(*r.OfType) + "]"
		}
		return *r.Name
	}
	served := map[string]map[string]string{} // type -> member -> rendered type ("" for enum values)
	kinds := map[string]string{}
	for _, ty := range out.Schema.Types {
		kinds[ty.Name] = ty.Kind
		m := map[string]string{}
		for _, f := range append(ty.Fields, ty.InputFields...) {
			m[f.Name] = render(f.Type)
			for _, a := range f.Args {
				m[f.Name+"("+a.Name+")"] = render(a.Type)
			}
		}
		for _, v := range ty.EnumValues {
			m[v.Name] = ""
		}
		served[ty.Name] = m
	}

	checked := 0
	for name, def := range contract.Types {
		if def.BuiltIn {
			continue
		}
		kind := map[ast.DefinitionKind]string{ast.Scalar: "SCALAR", ast.Object: "OBJECT", ast.Enum: "ENUM",
			ast.InputObject: "INPUT_OBJECT", ast.Interface: "INTERFACE", ast.Union: "UNION"}[def.Kind]
		if kinds[name] != kind {
			t.Errorf("type %s: contract %s, served %q", name, kind, kinds[name])
			continue
		}
		members := served[name]
		for _, f := range def.Fields {
			if f.Name == "__schema" || f.Name == "__type" { // the parser's introspection fields
				continue
			}
			if got, ok := members[f.Name]; !ok || got != f.Type.String() {
				t.Errorf("%s.%s: contract %s, served %q (present %v)", name, f.Name, f.Type, got, ok)
			}
			for _, a := range f.Arguments {
				key := f.Name + "(" + a.Name + ")"
				if got, ok := members[key]; !ok || got != a.Type.String() {
					t.Errorf("%s.%s: contract %s, served %q (present %v)", name, key, a.Type, got, ok)
				}
			}
			checked++
		}
		for _, v := range def.EnumValues {
			if _, ok := members[v.Name]; !ok {
				t.Errorf("enum %s lacks %s", name, v.Name)
			}
			checked++
		}
	}
	if checked < 60 {
		t.Fatalf("only %d contract members checked; is the contract file complete?", checked)
	}
}
