package gqlstream

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestOpTable checks opTable against a Go map (the oracle) over random sets and removals of a few ids.
func TestOpTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab opTable[int]
	want := map[string]int{}
	for step := range 20000 {
		id := strconv.Itoa(rng.IntN(12))
		if rng.IntN(3) == 0 {
			tab.remove(id)
			delete(want, id)
		} else {
			tab.set(id, step)
			want[id] = step
		}
		if len(tab) != len(want) {
			t.Fatalf("step %d: %d entries, want %d", step, len(tab), len(want))
		}
		for k := range 12 {
			id := strconv.Itoa(k)
			v, ok := tab.get(id)
			w, wok := want[id]
			if v != w || ok != wok {
				t.Fatalf("step %d: get(%s) = %d, %v; want %d, %v", step, id, v, ok, w, wok)
			}
		}
	}
	// Emptied, a table lets go of its memory.
	for k := range 12 {
		tab.remove(strconv.Itoa(k))
	}
	if tab != nil {
		t.Fatalf("an emptied table keeps %d entries' memory", cap(tab))
	}
}
