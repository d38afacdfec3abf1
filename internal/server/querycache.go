package server

import (
	"context"

	"github.com/leaderboard/leaderboard/internal/lru"
	"github.com/vektah/gqlparser/v2/ast"
)

// docCostPerByte estimates the memory of a parsed and validated document per byte of its query text, from a
// large document's.
const docCostPerByte = 32

// docCache is gqlgen's parsed-document cache bounded by entries and by an estimate of the bytes the documents
// hold (QUERY_CACHE_SIZE, QUERY_CACHE_BYTES).
type docCache struct {
	lru *lru.LRU[*ast.QueryDocument]
}

func newDocCache(entries int, bytes int64) docCache {
	return docCache{lru.New[*ast.QueryDocument](max(1, entries), max(1, bytes))}
}

func (c docCache) Get(_ context.Context, query string) (*ast.QueryDocument, bool) {
	return c.lru.Get(query)
}

func (c docCache) Add(_ context.Context, query string, doc *ast.QueryDocument) {
	c.lru.Add(query, doc, int64(docCostPerByte*len(query)+1024))
}

// apqCache is the automatic-persisted-query cache (hash -> query text) bounded by entries and by the bytes of
// the kept queries (APQ_CACHE_SIZE, QUERY_CACHE_BYTES): a client registering many large queries cannot grow it
// past them.
type apqCache struct{ lru *lru.LRU[string] }

func newAPQCache(entries int, bytes int64) apqCache {
	return apqCache{lru.New[string](max(1, entries), max(1, bytes))}
}

func (c apqCache) Get(_ context.Context, hash string) (string, bool) { return c.lru.Get(hash) }

func (c apqCache) Add(_ context.Context, hash, query string) {
	c.lru.Add(hash, query, int64(len(hash)+len(query)+64))
}
