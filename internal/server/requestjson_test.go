package server

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

// FuzzDecodeRequest: whatever decodeRequest reads, gqlgen's POST transport reads the same (query, operation name,
// variables, extensions, deeply equal), and the bodies clients send are read, not left to gqlgen.
func FuzzDecodeRequest(f *testing.F) {
	taken := []string{
		`{"query":"mutation($in: ScoreInput!) { submitScore(input: $in) { updated } }","variables":{"in":{"board":"b","playerId":"p1","score":1.5}}}`,
		`{"query":"q","operationName":"Op","variables":{"a":[1,-2.5e+3,true,false,null,"s",{"x":[]}],"b":{}},"extensions":{}}`,
		` {"variables":null,"query":"q\n\"\\\/\b\f\r\t\u00e9\ud83d\ude00","operationName":null} trailing`,
		`{}`,
		`{"query":"日本語","variables":{"n":0,"m":-0,"k":1E9,"j":0.5e-2}}`,
	}
	for _, s := range taken {
		if _, ok := decodeRequest([]byte(s)); !ok {
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
		if _, ok := decodeRequest([]byte(s)); ok {
			f.Fatalf("read, but it should be left to gqlgen: %s", s)
		}
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeRequest(body)
		if !ok {
			return
		}
		want, err := gqlgenDecode(body)
		if err != nil {
			t.Fatalf("decodeRequest read %q, encoding/json refuses it: %v", body, err)
		}
		if got.Query != want.Query || got.OperationName != want.OperationName ||
			!reflect.DeepEqual(got.Variables, want.Variables) || !reflect.DeepEqual(got.Extensions, want.Extensions) {
			t.Fatalf("%q\n  decodeRequest %#v\n  encoding/json %#v", body, got, want)
		}
	})
}
