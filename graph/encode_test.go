package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
)

func marshaled(m graphql.Marshaler) []byte {
	var b bytes.Buffer
	m.MarshalGQL(&b)
	return b.Bytes()
}

// FuzzEncodeScalars: the prepared encoder writes strings, floats, times and JSON metadata byte for byte as the
// generated marshalers do (graphql.MarshalString, model.MarshalFloat, graphql.MarshalTime, model.MarshalJSON),
// and declines exactly the values they answer with null or invalid JSON.
func FuzzEncodeScalars(f *testing.F) {
	for _, s := range []string{"", "plain", `<b>&"q"</b>`, "tab\tnl\ncr\r\\ \x00\x1f\x7f", "\u2028\u2029 日本 ✓", "\xff\xfe bad utf8 \xc3"} {
		f.Add(s, 1.5, int64(1764547200123456789), 3600)
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1e6, 999999, 1e21, 1e-5, 0.0001, 5e-324, math.MaxFloat64, 9007199254740993, -42.125} {
		f.Add("", x, int64(0), 0)
	}
	f.Add(`{"a":[1,"<x>"]}`, math.NaN(), int64(-62135596800000000), -34200)
	f.Add(`{"a":`, math.Inf(1), int64(253402300799999999), 50400)
	f.Fuzz(func(t *testing.T, s string, x float64, nanos int64, offset int) {
		if got, want := appendQuoted([]byte("x"), s), append([]byte("x"), marshaled(graphql.MarshalString(s))...); !bytes.Equal(got, want) {
			t.Fatalf("string %q: %s, want %s", s, got, want)
		}
		got, ok := appendFloat(nil, x)
		if want := marshaled(model.MarshalFloat(x)); ok != (!math.IsNaN(x) && !math.IsInf(x, 0)) || ok && !bytes.Equal(got, want) {
			t.Fatalf("float %v: %s (ok %v), want %s", x, got, ok, want)
		}
		tm := time.Unix(0, nanos).In(time.FixedZone("z", offset%(18*3600)))
		if m := graphql.MarshalTime(tm); m != graphql.Null {
			if got, want := appendTime(nil, tm), marshaled(m); !bytes.Equal(got, want) {
				t.Fatalf("time %v: %s, want %s", tm, got, want)
			}
		}
		// Metadata is written as model.MarshalJSON writes it: null unless valid JSON.
		e := leaderboard.Entry{Metadata: json.RawMessage(s)}
		sel, _ := compileSelection(ast.SelectionSet{&ast.Field{Name: "metadata", Alias: "metadata"}}, entrySelKinds)
		got, _ = appendEntry(nil, sel, &e)
		if want := append(append([]byte(`{"metadata":`), marshaled(model.MarshalJSON(e.Metadata))...), '}'); !bytes.Equal(got, want) {
			t.Fatalf("metadata %q: %s, want %s", s, got, want)
		}
	})
}
