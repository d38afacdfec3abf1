package gqlhttp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// gqlgenDecode decodes a body as gqlgen's POST transport does.
func gqlgenDecode(body []byte) (*graphql.RawParams, error) {
	var p graphql.RawParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return &p, dec.Decode(&p)
}

// FuzzBodyParams: whatever FastBodyParams reads, gqlgen's POST transport reads the same (query, operation name,
// variables, extensions, deeply equal), and the bodies clients send are read by it, not left to encoding/json;
// BodyParams reads every body as gqlgen does, and refuses what gqlgen refuses.
func FuzzBodyParams(f *testing.F) {
	taken := []string{
		`{"query":"mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }","variables":{"in":{"board":"b","playerId":"p1","score":1.5}}}`,
		`{"query":"q","operationName":"Op","variables":{"a":[1,-2.5e+3,true,false,null,"s",{"x":[]}],"b":{}},"extensions":{}}`,
		` {"variables":null,"query":"q\n\"\\\/\b\f\r\t\u00e9\ud83d\ude00","operationName":null} trailing`,
		`{}`,
		`{"query":"日本語","variables":{"n":0,"m":-0,"k":1E9,"j":0.5e-2}}`,
	}
	for _, s := range taken {
		if _, ok := FastBodyParams([]byte(s)); !ok {
			f.Fatalf("not read: %s", s)
		}
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"Query":"q"}`, `{"query":"q","query":"r"}`, `{"variables":{"a":1,"a":2}}`, `{"query":1}`, `[]`, ``,
		`{"variables":{"a":01}}`, `{"variables":{"a":1.}}`, `{"variables":{"a":"\ud800"}}`, `{"query":"\x"}`,
		"{\"query\":\"\xff\"}", `{"variables":{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`,
		`{"query":"q",}`, `{"query" "q"}`, `{"variables":{"a":tru}}`,
	} {
		if _, ok := FastBodyParams([]byte(s)); ok {
			f.Fatalf("read, but it should be left to encoding/json: %s", s)
		}
		f.Add([]byte(s))
	}
	same := func(a, b *graphql.RawParams) bool {
		return a.Query == b.Query && a.OperationName == b.OperationName &&
			reflect.DeepEqual(a.Variables, b.Variables) && reflect.DeepEqual(a.Extensions, b.Extensions)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, err := gqlgenDecode(body)
		all, allErr := BodyParams(body)
		if (err == nil) != (allErr == nil) || (err == nil && !same(all, want)) {
			t.Fatalf("%q\n  BodyParams    %#v (%v)\n  encoding/json %#v (%v)", body, all, allErr, want, err)
		}
		got, ok := FastBodyParams(body)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("FastBodyParams read %q, encoding/json refuses it: %v", body, err)
		}
		if !same(got, want) {
			t.Fatalf("%q\n  FastBodyParams %#v\n  encoding/json  %#v", body, got, want)
		}
	})
}
