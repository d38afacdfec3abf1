package gqlstream

// opTable maps the operation ids of one connection to V. It is a slice, not a map: a connection runs few
// operations at once (at most MAX_SUBSCRIPTIONS_PER_CONN, 100 by default) and an idle screen runs one, which a Go
// map holds in 0.25-0.35 KiB and a slice in one entry; lookups scan (with MAX_SUBSCRIPTIONS_PER_CONN=0, no bound,
// a message costs time linear in its connection's operations, as each of them costs memory).
type opTable[V any] []opEntry[V]

type opEntry[V any] struct {
	id string
	v  V
}

// get returns id's value and whether id is in t.
func (t opTable[V]) get(id string) (V, bool) {
	for _, e := range t {
		if e.id == id {
			return e.v, true
		}
	}
	var zero V
	return zero, false
}

// set gives id the value v, in place of the value it had.
func (t *opTable[V]) set(id string, v V) {
	for i := range *t {
		if (*t)[i].id == id {
			(*t)[i].v = v
			return
		}
	}
	*t = append(*t, opEntry[V]{id, v})
}

// remove takes id out of t; an emptied table lets go of its memory.
func (t *opTable[V]) remove(id string) {
	s := *t
	for i := range s {
		if s[i].id == id {
			last := len(s) - 1
			s[i] = s[last]
			s[last] = opEntry[V]{}
			*t = s[:last]
			break
		}
	}
	if len(*t) == 0 {
		*t = nil
	}
}
