// Command gqlgen is `make generate`: gqlgen's generate (gqlgen.yml) with one plugin of this repository, which
// writes graph/operation_generated.go. That file gives the root fields that package graph runs itself (the
// prepared path, prepared.go, and the live renderers, live.go) their generated field contexts, argument
// decoding and marshalers under names of this plugin's making: gqlgen's own names for them are internal, spelled
// from the Go types they bind, and change when a binding or gqlgen does.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"go/types"
	"io"
	"log"
	"os"
	"strings"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
	"github.com/99designs/gqlgen/codegen/templates"
	"github.com/vektah/gqlparser/v2/ast"
)

// rootFields are the fields graph runs without gqlgen's generated root resolvers: the prepared roots
// (graph/prepared.go) and the subscriptions it streams (graph/live.go).
var rootFields = []string{
	"Mutation.submitScore", "Mutation.submitScores",
	"Query.rank", "Query.aroundMe", "Query.friends",
	"Subscription.topUpdates", "Subscription.rankUpdates",
}

func main() {
	// As gqlgen's own command: its progress log (binding notes) only with -v.
	verbose := flag.Bool("v", false, "show gqlgen's log")
	flag.Parse()
	log.SetFlags(0)
	if !*verbose {
		log.SetOutput(io.Discard)
	}
	cfg, err := config.LoadConfigFromDefaultLocations()
	if err == nil {
		err = api.Generate(cfg, api.AddPlugin(operationPlugin{
			filename: "graph/operation_generated.go",
			fields:   rootFields,
		}))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

//go:embed operation.gotpl
var operationTemplate string

// operationPlugin writes the generated operation of the listed root fields (see the package comment) into the
// exec package.
type operationPlugin struct {
	filename string
	fields   []string // Object.field
}

func (operationPlugin) Name() string { return "graphoperation" }

// rootField is a listed field as the template needs it.
type rootField struct {
	*codegen.Field
	Prefix   string // the listed field's method names start with it: queryRank
	IsMethod bool   // the field context's IsMethod, as gqlgen sets it
	// Args decode the arguments without path contexts; nil with ArgsPlain false: only gqlgen's way decodes
	// them (an argument with directives).
	Args      []plainArg
	ArgsPlain bool
}

type plainArg struct {
	Name   string
	GO     types.Type
	Decode string // the expression of its decoder, func(context.Context, any) (GO, error)
}

// decoder decodes a list or an input object without path contexts: a list element by element, an input object
// field by field; every other type by gqlgen's own unmarshaler.
type decoder struct {
	Name    string
	GO      types.Type
	List    bool
	NilList bool   // a nullable list: null decodes to nil
	Elem    string // the list element's decoder
	Fields  []inputField
}

type inputField struct {
	Name, GoFieldName, Decode string
}

type generator struct {
	inputs   map[string]*codegen.Object
	decoders []*decoder
	seen     map[string]bool
}

func (p operationPlugin) GenerateCode(data *codegen.Data) error {
	if data.Config.UseFunctionSyntaxForExecutionContext {
		return fmt.Errorf("%s: use_function_syntax_for_execution_context is not supported", p.Name())
	}
	g := &generator{inputs: map[string]*codegen.Object{}, seen: map[string]bool{}}
	var indexed []*codegen.Object // the inputs of Exec's input unmarshaler index
	for _, in := range data.Inputs {
		g.inputs[in.Name] = in
		if !in.HasUnmarshal() {
			indexed = append(indexed, in)
		}
	}
	var fields []rootField
	for _, name := range p.fields {
		f, err := findField(data, name)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		rf := rootField{Field: f, Prefix: templates.LcFirst(f.Object.Name) + templates.UcFirst(f.Name),
			IsMethod: f.IsMethod() || f.IsResolver, ArgsPlain: true}
		for _, a := range f.Args {
			if len(a.ImplDirectives()) > 0 {
				rf.Args, rf.ArgsPlain = nil, false
				break
			}
			rf.Args = append(rf.Args, plainArg{Name: a.Name, GO: a.TypeReference.GO, Decode: g.decode(a.TypeReference)})
		}
		fields = append(fields, rf)
	}
	return templates.Render(templates.Options{
		PackageName:     data.Config.Exec.Package,
		Filename:        p.filename,
		GeneratedHeader: true,
		Template:        operationTemplate,
		Packages:        data.Config.Packages,
		PruneOptions:    data.Config.GetPruneOptions(),
		Data: struct {
			Fields   []rootField
			Decoders []*decoder
			Inputs   []*codegen.Object
		}{fields, g.decoders, indexed},
	})
}

func findField(data *codegen.Data, name string) (*codegen.Field, error) {
	object, field, _ := strings.Cut(name, ".")
	for _, o := range data.Objects {
		if o.Name != object {
			continue
		}
		for _, f := range o.Fields {
			if f.Name == field {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("no field %s in the schema", name)
}

// decode returns the expression of ref's decoder: gqlgen's unmarshaler, or for a list or a plain input object
// (plainInput) one of the decoders it adds.
func (g *generator) decode(ref *config.TypeReference) string {
	generated := "o.ec." + ref.UnmarshalFunc()
	list := ref.IsSlice() && !ref.IsOmittable
	in := g.plainInput(ref)
	if !list && in == nil {
		return generated
	}
	name := "plain" + strings.TrimPrefix(ref.UnmarshalFunc(), "unmarshal")
	if g.seen[name] {
		return "o." + name
	}
	g.seen[name] = true
	d := &decoder{Name: name, GO: ref.GO, List: list}
	g.decoders = append(g.decoders, d)
	if list {
		// As gqlgen's list unmarshaler: null is nil for a nullable list (type.gotpl).
		d.NilList = ref.IsNilable() && !ref.GQL.NonNull && !ref.IsPtrToPtr()
		d.Elem = g.decode(ref.Elem())
	} else {
		for _, f := range in.Fields {
			d.Fields = append(d.Fields, inputField{Name: f.Name, GoFieldName: f.GoFieldName, Decode: g.decode(f.TypeReference)})
		}
	}
	return "o." + name
}

// plainInput returns the input object of ref when its generated unmarshaler does nothing but decode each field
// by its type's unmarshaler into a value of the input's Go type (no defaults, directives, resolvers, omittable
// fields or custom unmarshaling), nil otherwise.
func (g *generator) plainInput(ref *config.TypeReference) *codegen.Object {
	if ref.Definition == nil || ref.Definition.Kind != ast.InputObject || ref.Unmarshaler != nil ||
		ref.IsMarshaler || ref.IsNilable() || ref.PointersInUnmarshalInput {
		return nil
	}
	in := g.inputs[ref.Definition.Name]
	if in == nil || in.IsMap() || in.HasUnmarshal() || in.PointersInUnmarshalInput ||
		len(in.InputObjectDirectives()) > 0 || !types.Identical(ref.GO, in.Type) {
		return nil
	}
	for _, f := range in.Fields {
		if f.Default != nil || len(f.ImplDirectives()) > 0 || f.IsResolver || f.TypeReference.IsOmittable {
			return nil
		}
	}
	return in
}
