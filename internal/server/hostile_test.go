package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// introspectionQuery is the query GraphiQL (graphql-js getIntrospectionQuery) sends.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
  ofType { kind name ofType { kind name ofType { kind name } } } } } } } }`

// doubling returns the 1.3 KB document whose complexity walk doubled per fragment: F0 spreads F1 twice, F1 F2
// twice, ..., F40 is __typename.
func doubling(n int) string {
	var b strings.Builder
	b.WriteString("query { ...F0 }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { __typename }\n", n)
	return b.String()
}

func aliases(n int, sel string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " a%d: %s", i, sel)
	}
	b.WriteString(" }")
	return b.String()
}

// within runs f and fails when it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > d {
		t.Fatalf("%s took %v, want at most %v", what, took, d)
	}
}

// reason returns extensions.reason of the response's first error.
func reason(r gqlResponse) string {
	if len(r.Errors) == 0 {
		return ""
	}
	s, _ := r.Errors[0].Extensions["reason"].(string)
	return s
}

// Documents that cost far more than their size are refused quickly, on every transport, before they run.
func TestHostileDocuments(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "h"})

	t.Run("doubling fragments", func(t *testing.T) {
		q := doubling(40)
		if len(q) > 2000 {
			t.Fatalf("document of %d bytes", len(q))
		}
		within(t, 2*time.Second, "POST", func() {
			if r := s.do(t, "", q, nil); r.Status != 422 && reason(r) != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Fatalf("POST: status %d %+v", r.Status, r.Errors)
			}
		})
		within(t, 2*time.Second, "GET", func() {
			resp, err := http.Get(s.URL + "/graphql?query=" + url.QueryEscape(q))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "COMPLEXITY_LIMIT_EXCEEDED") {
				t.Fatalf("GET: %d %s", resp.StatusCode, body)
			}
		})
	})

	t.Run("introspection amplification", func(t *testing.T) {
		// The whole-schema introspection GraphiQL sends still works...
		var out struct {
			Schema struct{ Types []struct{ Name string } } `json:"__schema"`
		}
		s.must(t, "", introspectionQuery, nil, &out)
		if len(out.Schema.Types) < 10 {
			t.Fatalf("introspection: %d types", len(out.Schema.Types))
		}
		// ...but not thousands of them in one request.
		q := aliases(2000, "__schema { types { name fields { name type { name } } } }")
		within(t, 2*time.Second, "2000 aliased introspections", func() {
			r := s.do(t, "", q, nil)
			if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || len(r.Data) > 10 {
				t.Fatalf("status %d errors %+v data %d bytes", r.Status, r.Errors, len(r.Data))
			}
		})
		if r := s.do(t, "", aliases(30, "__schema { queryType { name } }"), nil); reason(r) != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Fatalf("30 introspections: %+v", r.Errors)
		}
	})

	t.Run("many aliases", func(t *testing.T) {
		for _, q := range []string{aliases(40000, "__typename"), aliases(5000, "__typename"),
			aliases(1001, `top(board: "h", first: 1) { rank }`)} {
			within(t, 2*time.Second, fmt.Sprintf("%d bytes of aliases", len(q)), func() {
				r := s.do(t, "", q, nil)
				if len(r.Errors) == 0 || r.Errors[0].Code() != "BAD_USER_INPUT" {
					t.Fatalf("%d bytes: status %d errors %+v", len(q), r.Status, r.Errors)
				}
			})
		}
		// The bound is on the document, not on honest use: 1000 aliases are fine.
		var out map[string]any
		s.must(t, "", aliases(1000, "__typename"), nil, &out)
		if len(out) != 1000 {
			t.Fatalf("%d answers", len(out))
		}
	})
}

// Parsed documents are kept within QUERY_CACHE_BYTES: many distinct large documents do not pile up.
func TestDocumentCacheIsBoundedByBytes(t *testing.T) {
	c := newDocCache(1000, 8<<20)
	for i := range 200 {
		q := fmt.Sprintf("query Q%d { %s }", i, strings.Repeat("__typename ", 10_000)) // ~110 KB
		c.Add(context.Background(), q, nil)
	}
	if n, size := c.lru.Stats(); size > 8<<20 || n > 3 {
		t.Fatalf("%d documents estimated at %d bytes kept, want at most 8 MiB", n, size)
	}
	apq := newAPQCache(1000, 8<<20)
	for i := range 200 {
		apq.Add(context.Background(), fmt.Sprint("hash", i), strings.Repeat("x", 500_000))
	}
	if n, size := apq.lru.Stats(); size > 8<<20 || n > 16 {
		t.Fatalf("%d persisted queries of %d bytes kept, want at most 8 MiB", n, size)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	cfg := testConfig(t)
	cfg.QueryCacheBytes = 16 << 20
	s := startServer(t, cfg)
	for i := range 60 { // each ~60 KB of text, 2000 fields: refused only after parsing and validation
		q := fmt.Sprintf("query Q%d %s", i, aliases(990, "__typename"))
		s.must(t, "", q, nil, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapAlloc) - int64(before); grown > 100<<20 {
		t.Fatalf("heap grew by %d MiB after 60 large documents", grown>>20)
	}
}

// The document bounds leave honest use alone: a literal submitScores of 1000 items with names, eventIds and
// metadata (about 27000 tokens, the README's figure) runs with the default MAX_QUERY_TOKENS.
func TestBulkLiteralFitsTheTokenLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "lit"})
	var b strings.Builder
	b.WriteString("mutation { submitScores(inputs: [")
	for i := range 1000 {
		fmt.Fprintf(&b, `{board: "lit", playerId: "player-%d", score: %d, displayName: "Player %d", eventId: "match-1-%d", metadata: {team: "red", level: 3}}`, i, i, i, i)
	}
	b.WriteString("]) { updated } }")
	var out struct{ SubmitScores []struct{ Updated bool } }
	s.must(t, testSubmitKey, b.String(), nil, &out)
	if len(out.SubmitScores) != 1000 || !out.SubmitScores[999].Updated {
		t.Fatalf("%d results", len(out.SubmitScores))
	}
}
