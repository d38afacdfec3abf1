package topcache

import (
	"encoding/json"
	"testing"
)

// namesTop passes every body that can hold a top field and stops the queries that only select topPercent, which
// paid a full decode here before (every rank, aroundMe and friends request of a screen).
func TestNamesTop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"query":"{ top(board: \"a\") { rank } }"}`, true},
		{`{"query":"{top(board:\"a\"){rank}}"}`, true},
		{`{"query":"{ t: top (board: \"a\") { rank } }"}`, true},
		{`{"query":"{\ntop(board: \"a\") { rank }\n}"}`, true},
		{`{"query":"{\r\n\ttop\n(board: \"a\") { rank } }"}`, true},
		{`{"query":"query($b: ID!) { top(board: $b) { rank } }","variables":{"b":"a"}}`, true},
		{`{"query":"query($b: ID!, $p: ID!) { rank(board: $b, playerId: $p) { rank score topPercent } }"}`, false},
		{`{"query":"{ rank(board: \"tops\", playerId: \"stop\") { topPercent } }"}`, false},
		{`{"query":"mutation { submitScore(input: {board: \"a\", playerId: \"p\", score: 1}) { updated } }"}`, false},
		{`{"query":"{ rank(board: \"a\", playerId: \"p\") { topPercent } }","variables":{"x":"top"}}`, true}, // a value named top: decoded, then not planned
		{`top`, true},
		{``, false},
	} {
		if got := namesTop([]byte(c.body)); got != c.want {
			t.Errorf("namesTop(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}

// FuzzNamesTop: namesTop never stops a body that the cache would serve: whenever a query, sent the way
// encoding/json writes it, plans into top reads, namesTop passes the body.
func FuzzNamesTop(f *testing.F) {
	for _, q := range []string{`{ top(board: "a") { rank } }`, "{\ntop(board: \"a\"){rank}}", `{x:top(board:"a"){rank}}`,
		"{\ttop\n(board: \"a\") { rank } }", `query Q($b: ID!) { top(board: $b) { rank topPercent } }`,
		`{ rank(board: "a", playerId: "p") { topPercent } }`} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		p := planTopQuery(q, 10)
		if p == nil {
			return
		}
		body, err := json.Marshal(map[string]any{"query": q})
		if err != nil {
			return
		}
		if !namesTop(body) {
			t.Fatalf("%q plans into top reads, but namesTop stops its body %s", q, body)
		}
	})
}
