package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
)

// preparedArgDocs: the prepared roots with their arguments as variables (as clients send them) and as literals.
var preparedArgDocs = append(coerceDocs[:len(coerceDocs):len(coerceDocs)],
	`mutation { submitScore(input: {board: "b", playerId: "p", score: 3.5, displayName: "<n>", eventId: "e"}) { updated } }`,
	`mutation($s: Float!) { submitScore(input: {board: "b", playerId: "p", score: $s}) { updated } }`,
	`mutation { submitScores(inputs: [{board: "b", playerId: "p", score: 1}, {board: "b", playerId: 7, score: 2}]) { updated } }`,
	`query { aroundMe(board: "b", playerId: "p") { rank } }`,
	`query($w: Window) { rank(board: "b", playerId: "p", window: $w, period: "2030-01-01") { rank } }`,
	`query { friends(board: "b", playerId: "p", friendIds: "solo") { rank } }`,
)

// checkPreparedArgs compares the plain field context with gqlgen's for one document and its
// variables (JSON, validated as gqlgen validates them): when the prepared way takes the arguments, it must give
// the same field context; it returns whether it took them.
func checkPreparedArgs(t *testing.T, es graphql.ExecutableSchema, src string, vars []byte) (taken, valid bool) {
	t.Helper()
	schema := es.Schema()
	doc, errs := gqlparser.LoadQueryWithRules(schema, src, nil)
	if errs != nil {
		t.Fatalf("%s: %v", src, errs)
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(vars))
	dec.UseNumber()
	if dec.Decode(&raw) != nil {
		return false, false
	}
	op := doc.Operations[0]
	coerced, err := validator.VariableValues(schema, op, raw)
	if err != nil {
		return false, false
	}
	opCtx := &graphql.OperationContext{RawQuery: src, Variables: coerced, Doc: doc, Operation: op,
		RecoverFunc: graphql.DefaultRecover}
	ctx := graphql.WithResponseContext(graphql.WithOperationContext(context.Background(), opCtx),
		graphql.DefaultErrorPresenter, graphql.DefaultRecover)
	gen := newGeneratedOperation(es.(liveSchema).ExecutableSchema, opCtx, nil)
	plan := newPreparedPlans().plan(op)
	if plan == nil {
		t.Fatalf("%s: not prepared", src)
	}
	implementors := queryRoot
	if op.Operation == ast.Mutation {
		implementors = mutationRoot
	}
	field := graphql.CollectFields(opCtx, op.SelectionSet, implementors)[0]
	type fieldContext = func(context.Context, graphql.CollectedField) (*graphql.FieldContext, error)
	type plainFieldContext = func(context.Context, graphql.CollectedField) (*graphql.FieldContext, bool)
	ways := map[preparedRoot]struct {
		generated fieldContext
		plain     plainFieldContext
	}{
		prepSubmitScore:  {gen.mutationSubmitScoreFieldContext, gen.mutationSubmitScorePlainFieldContext},
		prepSubmitScores: {gen.mutationSubmitScoresFieldContext, gen.mutationSubmitScoresPlainFieldContext},
		prepRank:         {gen.queryRankFieldContext, gen.queryRankPlainFieldContext},
		prepAroundMe:     {gen.queryAroundMeFieldContext, gen.queryAroundMePlainFieldContext},
		prepFriends:      {gen.queryFriendsFieldContext, gen.queryFriendsPlainFieldContext},
	}[plan.root]
	want, wantErr := ways.generated(ctx, field)
	got, ok := ways.plain(ctx, field)
	if !ok {
		return false, true
	}
	if wantErr != nil {
		t.Fatalf("%s %s: the generated way refused the arguments (%v), the prepared way took them: %#v", src, vars, wantErr, got.Args)
	}
	if got.Object != want.Object || got.IsMethod != want.IsMethod || got.IsResolver != want.IsResolver ||
		!reflect.DeepEqual(got.Field, want.Field) || !reflect.DeepEqual(got.Args, want.Args) ||
		got.Parent != want.Parent || got.Index != want.Index || got.Result != want.Result || got.Child == nil {
		t.Fatalf("%s %s:\nprepared  %#v\ngenerated %#v", src, vars, got, want)
	}
	for k, v := range want.Args { // typed nils stay typed: the resolvers assert the types
		if reflect.TypeOf(got.Args[k]) != reflect.TypeOf(v) {
			t.Fatalf("%s %s: argument %s is a %T, want %T", src, vars, k, got.Args[k], v)
		}
	}
	return true, true
}

// TestPreparedArgsMatchGenerated: the prepared arguments of every prepared root are the generated ones, for the
// variables clients send; values the generated unmarshalers refuse are left to the generated way.
func TestPreparedArgsMatchGenerated(t *testing.T) {
	es := NewSchema(&Resolver{})
	for _, c := range []struct {
		doc   int
		vars  string
		taken bool
	}{
		{0, `{"in":{"board":"b","playerId":"p","score":1.5}}`, true},
		{0, `{"in":{"board":"b","playerId":"p","score":42,"eventId":"e","displayName":"Ada"}}`, true},
		{0, `{"in":{"board":"b","playerId":"p","score":-2,"eventId":null,"displayName":null}}`, true},
		{0, `{"in":{"board":"b","playerId":"p","score":1e300}}`, true},            // beyond 2^53: the Score holds the refusal
		{0, `{"in":{"board":"b","playerId":"p","score":9007199254740993}}`, true}, // beyond 2^53: the Score holds the refusal
		{0, `{"in":{"board":"b","playerId":"p","score":"1"}}`, false},             // not a number: refused
		{0, `{"in":{"board":"b","playerId":"p","score":1,"metadata":{"k":[1,"<&>"]}}}`, true},
		{0, `{"in":{"board":"b","playerId":"p","score":1,"achievedAt":"2030-01-01T00:00:00.5+02:00"}}`, true},
		{0, `{"in":{"board":"b","playerId":"p","score":1,"metadata":{"k":"` + strings.Repeat("m", 2000) + `"}}}`, false}, // too large: refused
		{0, `{"in":{"board":"b","playerId":"p","score":1,"achievedAt":"yesterday"}}`, false},
		{1, `{"b":"b","p":"p","r":3,"w":"DAILY","per":"2030-01-01"}`, true},
		{1, `{"b":"b","p":"p"}`, true},
		{1, `{"b":"b","p":"p","r":null,"w":null,"per":null}`, true},
		{1, `{"b":"b","p":"p","r":100000000000}`, false}, // not an Int
		{2, `{"b":"b","p":"p","w":"WEEKLY"}`, true},
		{3, `{"b":"b","p":"p","f":["x","y","x"]}`, true},
		{3, `{"b":"b","p":"p","f":[]}`, true},
		{3, `{"b":"b","p":"p","f":"solo"}`, true},
		{4, `{"in":[{"board":"b","playerId":"p","score":1},{"board":"b","playerId":"q","score":2.5,"eventId":"e"}]}`, true},
		{4, `{"in":[{"board":"b","playerId":"p","score":1},{"board":"b","playerId":"q","score":2,"metadata":{}}]}`, true},
		{4, `{"in":[{"board":"b","playerId":"p","score":1},{"board":"b","playerId":"q","score":2,"metadata":[]}]}`, false},
		{4, `{"in":[]}`, true},
		{4, `{"in":{"board":"b","playerId":"p","score":1}}`, true}, // one input where a list is expected
		{5, `{}`, true},
		{6, `{"s":2.25}`, true},
		{7, `{}`, true},
		{8, `{}`, true},
		{9, `{"w":"MONTHLY"}`, true},
		{10, `{}`, true},
	} {
		taken, valid := checkPreparedArgs(t, es, preparedArgDocs[c.doc], []byte(c.vars))
		if !valid {
			t.Fatalf("%s %s: not valid variables", preparedArgDocs[c.doc], c.vars)
		}
		if taken != c.taken {
			t.Errorf("%s %s: taken by the prepared way %v, want %v", preparedArgDocs[c.doc], c.vars, taken, c.taken)
		}
	}
}

// FuzzPreparedArgs: for any variables gqlgen accepts, the prepared arguments are the generated ones or left to
// the generated way.
func FuzzPreparedArgs(f *testing.F) {
	es := NewSchema(&Resolver{})
	for i, vars := range []string{
		`{"in":{"board":"b","playerId":"p","score":1.5,"eventId":"e","displayName":"d"}}`,
		`{"b":"b","p":"p","r":3,"w":"daily","per":"x"}`,
		`{"b":1,"p":"p","w":"ALL_TIME"}`,
		`{"b":"b","p":"p","f":["x",2]}`,
		`{"in":[{"board":"b","playerId":"p","score":1},{"board":"b","playerId":"q","score":-0.5e3}]}`,
		`{"s":1e-9}`,
	} {
		f.Add(uint8(i), []byte(vars))
	}
	f.Fuzz(func(t *testing.T, doc uint8, vars []byte) {
		checkPreparedArgs(t, es, preparedArgDocs[int(doc)%len(preparedArgDocs)], vars)
	})
}
