package fastpath

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// FuzzMarshalResponse: marshalResponse writes what json.Marshal writes, for every valid JSON the data may hold
// (marshalResponse skips encoding/json's pass over data it would copy unchanged), with and without errors.
func FuzzMarshalResponse(f *testing.F) {
	for _, s := range []string{`{"friends":[{"playerId":"p1","rank":1,"score":10,"topPercent":0.0001}]}`,
		`{"rank":{"displayName":"Zoë <b>","metadata":{"a": [1, 2]}}}`, `null`, `{"x":"\u2028\u0026"}`, ` {"a":1} `,
		`{"s":"tab\there"}`, `[1,2,{"b":true}]`, `"\ud800"`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, withErrors bool) {
		if !json.Valid(data) {
			return
		}
		resp := &graphql.Response{Data: data}
		if withErrors {
			resp.Errors = gqlerror.List{{Message: "x"}}
		}
		want, errWant := json.Marshal(resp)
		got, errGot := marshalResponse(resp)
		if (errWant != nil) != (errGot != nil) || !bytes.Equal(got, want) {
			t.Fatalf("data %q: marshalResponse %q (%v), json.Marshal %q (%v)", data, got, errGot, want, errWant)
		}
	})
}
