// Package lru is a least-recently-used map bounded by entry count and by total size, safe for concurrent use:
// the server's caches (parsed documents, persisted queries, the top response cache) keep to memory bounds with it.
package lru

import (
	"container/list"
	"sync"
)

// LRU is a mutex-guarded least-recently-used map bounded by entry count and by total size (in the unit the
// caller gives add).
type LRU[V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxSize    int64
	size       int64
	order      *list.List // front: most recently used; values *item[V]
	items      map[string]*list.Element
}

type item[V any] struct {
	key  string
	val  V
	size int64
}

// New returns an LRU holding at most maxEntries entries of at most maxSize in total (in the unit Add is given).
func New[V any](maxEntries int, maxSize int64) *LRU[V] {
	return &LRU[V]{maxEntries: maxEntries, maxSize: maxSize, order: list.New(), items: map[string]*list.Element{}}
}

// Get returns the value of key and makes it the most recently used.
func (c *LRU[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*item[V]).val, true
	}
	var zero V
	return zero, false
}

// Add stores key (replacing an older value) and evicts the least recently used entries beyond the bounds. A
// value larger than the whole size bound is not stored.
func (c *LRU[V]) Add(key string, val V, size int64) {
	if size > c.maxSize {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		it := e.Value.(*item[V])
		c.size += size - it.size
		it.val, it.size = val, size
		c.order.MoveToFront(e)
	} else {
		c.items[key] = c.order.PushFront(&item[V]{key: key, val: val, size: size})
		c.size += size
	}
	for len(c.items) > c.maxEntries || c.size > c.maxSize {
		e := c.order.Back()
		it := e.Value.(*item[V])
		c.order.Remove(e)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

// Stats returns the number of entries and their total size.
func (c *LRU[V]) Stats() (entries int, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}
