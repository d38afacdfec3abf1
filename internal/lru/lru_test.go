package lru

import (
	"strconv"
	"testing"
)

func TestLRU(t *testing.T) {
	c := New[int](3, 100)
	for i := range 10 {
		c.Add(strconv.Itoa(i), i, 10)
	}
	if n, size := c.Stats(); n != 3 || size != 30 {
		t.Fatalf("entries %d size %d, want 3 and 30", n, size)
	}
	if _, ok := c.Get("6"); ok {
		t.Fatal("6 should have been evicted")
	}
	c.Get("7")        // 7 becomes the most recently used
	c.Add("x", 0, 80) // 110 bytes: the least recently used (8) goes
	if n, size := c.Stats(); n != 3 || size != 100 {
		t.Fatalf("after a big entry: entries %d size %d, want 3 and 100", n, size)
	}
	if _, ok := c.Get("8"); ok {
		t.Fatal("8 should have been evicted")
	}
	if _, ok := c.Get("7"); !ok {
		t.Fatal("the recently used entry was evicted")
	}
	c.Add("huge", 0, 101)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("an entry over the size bound was stored")
	}
	c.Add("7", 1, 20) // replacing an entry updates its size: 110 bytes, so 9 goes
	if v, _ := c.Get("7"); v != 1 {
		t.Fatal("replace")
	}
	if n, size := c.Stats(); n != 2 || size != 100 {
		t.Fatalf("after replace: entries %d size %d", n, size)
	}
}
