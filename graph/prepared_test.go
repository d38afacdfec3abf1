package graph

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func parseOp(t *testing.T, q string) *ast.OperationDefinition {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		t.Fatal(err)
	}
	return doc.Operations[0]
}

// TestPreparedPlans: which operations are prepared, and the plan cache's bounds (it never holds more than
// maxPreparedPlans; a document over maxPreparedSource bytes is planned but not kept).
func TestPreparedPlans(t *testing.T) {
	c := newPreparedPlans()
	for q, want := range map[string]preparedRoot{
		`mutation { submitScore(input: {board: "b", playerId: "p", score: 1}) { updated entry { rank } } }`: prepSubmitScore,
		`mutation { s: submitScores(inputs: []) { __typename duplicate } }`:                                 prepSubmitScores,
		`query { rank(board: "b", playerId: "p") { rank score } }`:                                          prepRank,
		`{ aroundMe(board: "b", playerId: "p") { playerId } }`:                                              prepAroundMe,
		`{ friends(board: "b", playerId: "p", friendIds: []) { playerId } }`:                                prepFriends,
		`{ rank(board: "b", playerId: "p") { ...F } } fragment F on Entry { rank }`:                         0,
		`{ rank(board: "b", playerId: "p") { ... on Entry { rank } } }`:                                     0,
		`{ rank(board: "b", playerId: "p") { rank @include(if: true) } }`:                                   0,
		`{ rank(board: "b", playerId: "p") @skip(if: false) { rank } }`:                                     0,
		`query @x { rank(board: "b", playerId: "p") { rank } }`:                                             0,
		`{ rank(board: "b", playerId: "p") { r: rank r: rank } }`:                                           0,
		`{ rank(board: "b", playerId: "p") { rank } top(board: "b") { rank } }`:                             0,
		`{ top(board: "b") { rank } }`:                                                                      0,
		`mutation { rank(board: "b", playerId: "p") { rank } }`:                                             0,
		`subscription { rankUpdates(board: "b", playerId: "p") { rank } }`:                                  0,
		`mutation { submitScore(input: {board: "b", playerId: "p", score: 1}) { entry { nope } } }`:         0,
		`mutation { submitScore(input: {board: "b", playerId: "p", score: 1}) { entry } }`:                  0,
	} {
		p := c.plan(parseOp(t, q))
		if got := preparedRoot(0); p != nil {
			got = p.root
			if got != want {
				t.Errorf("%s: root %d, want %d", q, got, want)
			}
		} else if want != 0 {
			t.Errorf("%s: not prepared, want root %d", q, want)
		}
	}
	big := parseOp(t, `{ rank(board: "`+strings.Repeat("b", maxPreparedSource)+`", playerId: "p") { rank } }`)
	before := len(c.m)
	if p := c.plan(big); p == nil || len(c.m) != before {
		t.Fatalf("a large document: plan %v, cached %d -> %d", p, before, len(c.m))
	}
	for i := range maxPreparedPlans + 100 {
		if c.plan(parseOp(t, fmt.Sprintf(`{ a%d: rank(board: "b", playerId: "p") { rank } }`, i))) == nil {
			t.Fatal("not prepared")
		}
		if len(c.m) > maxPreparedPlans {
			t.Fatalf("%d plans kept, at most %d", len(c.m), maxPreparedPlans)
		}
	}
	op := parseOp(t, `{ rank(board: "b", playerId: "p") { rank } }`)
	if p1, p2 := c.plan(op), c.plan(op); p1 != p2 {
		t.Fatal("the same document planned twice: not kept")
	}
}
