package topcache

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

func TestTopPlan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query, op string
		vars      map[string]any
		want      string // reads as board/window/period/offset/first, or "-" for none
	}{
		{`{ top(board: "a") { rank } }`, "", nil, "a///0/10"},
		{`{ top(board: "a", first: 3, offset: 2, window: WEEKLY, period: "2026-W01") { rank } }`, "", nil,
			"a/WEEKLY/2026-W01/2/3"},
		{`query Q($b: ID!, $n: Int = 7) { x: top(board: $b, first: $n) { rank } y: top(board: $b, first: null) { rank } }`,
			"Q", map[string]any{"b": "a"}, "a///0/7 a///0/10"},
		{`query($n: Int = 7) { top(board: "a", first: $n) { rank } }`, "", map[string]any{"n": nil}, "a///0/10"},
		{`query($n: Int) { top(board: "a", first: $n) { rank } }`, "", map[string]any{"n": json.Number("4")},
			"a///0/4"},
		{`query($n: Int) { top(board: "a", first: $n) { rank } }`, "", map[string]any{"n": json.Number("4.0")}, "-"},
		{`query($n: Int) { top(board: "a", first: $n) { rank } }`, "", map[string]any{"n": "4"}, "-"},
		{`query($b: ID!) { top(board: $b) { rank } }`, "", map[string]any{"b": json.Number("4")}, "-"},
		{`{ top(board: 4) { rank } }`, "", nil, "-"},
		{`{ top(board: "a") { rank } __typename }`, "", nil, "-"},
		{`{ top(board: "a") { rank } rank(board: "a", playerId: "p") { rank } }`, "", nil, "-"},
		{`{ ...F } fragment F on Query { top(board: "a") { rank } }`, "", nil, "-"},
		{`{ top(board: "a") @skip(if: true) { rank } }`, "", nil, "-"},
		{`query @x { top(board: "a") { rank } }`, "", nil, "-"},
		{`mutation { top(board: "a") { rank } }`, "", nil, "-"},
		{`subscription { top(board: "a") { rank } }`, "", nil, "-"},
		{`{ top(board: "a", board: "b") { rank } }`, "", nil, "-"},
		{`{ top(board: "a", nope: 1) { rank } }`, "", nil, "-"},
		{`{ top(first: 1) { rank } }`, "", nil, "-"},
		{`{ top(board: "a" { rank } }`, "", nil, "-"},
		{`query A { top(board: "a") { rank } } query B { top(board: "b") { rank } }`, "B", nil, "b///0/10"},
		{`query A { top(board: "a") { rank } } query B { top(board: "b") { rank } }`, "", nil, "-"},
		{`query A { top(board: "a") { rank } } mutation B { x }`, "B", nil, "-"},
	} {
		got := "-"
		if p := planTopQuery(c.query, 10); p != nil {
			if op := p.operation(c.op); op != nil {
				if reads := op.reads(c.vars); reads != nil {
					var parts []string
					for _, r := range reads {
						parts = append(parts, fmt.Sprintf("%s/%s/%s/%d/%d", r.view.Board, r.view.Window,
							r.view.Period, r.offset, r.first))
					}
					got = strings.Join(parts, " ")
				}
			}
		}
		if got != c.want {
			t.Errorf("%s (op %q, vars %v): %s, want %s", c.query, c.op, c.vars, got, c.want)
		}
	}
}

// The default of `first` comes from the schema, not from a constant.
func TestDefaultFirstFromSchema(t *testing.T) {
	for sdl, want := range map[string]int{
		`type Query { top(board: ID!, first: Int = 7): [Int] }`:  7,
		`type Query { top(board: ID!, first: Int = 25): [Int] }`: 25,
	} {
		schema, err := gqlparser.LoadSchema(&ast.Source{Input: sdl})
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultFirst(schema); got != want {
			t.Fatalf("%s: default first %d, want %d", sdl, got, want)
		}
		p := planTopQuery(`{ top(board: "a") { rank } }`, defaultFirst(schema))
		if reads := p.operation("").reads(nil); len(reads) != 1 || reads[0].first != want {
			t.Fatalf("%s: reads %+v", sdl, reads)
		}
	}
}
