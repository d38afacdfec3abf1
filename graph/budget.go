package graph

import (
	"context"
	"fmt"
	"sync"

	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Cost is what one operation takes of the request limits: its complexity and the field selections of its
// document (known before it runs, from ComplexityLimit) and the bytes of its answer (known once it has run).
type Cost struct {
	Complexity, Fields, Bytes int
}

// Budget is what the operations of one batched HTTP request may cost together: MAX_QUERY_COMPLEXITY,
// MAX_QUERY_FIELDS and MAX_RESPONSE_BYTES bound a whole batch as they bound one request, so that a batch of ten
// costs no more than one request may (it multiplied it tenfold). An operation runs only if its complexity and
// fields fit what the operations before it left; its answer is kept only if its bytes fit (a mutation's always
// is: its writes are done, and the client must learn of them). A limit of 0 bounds nothing. Safe for concurrent
// use.
type Budget struct {
	max  Cost
	mu   sync.Mutex
	used Cost
}

// NewBudget returns the budget of one batch under the limits of c.
func (c *ComplexityLimit) NewBudget() *Budget {
	return &Budget{max: Cost{Complexity: c.Max, Fields: c.MaxFields, Bytes: c.MaxResponseBytes}}
}

// Operation returns the context of one operation of the batch: its meter charges the budget.
func (b *Budget) Operation(ctx context.Context) context.Context {
	return context.WithValue(ctx, meterKey{}, &Meter{budget: b})
}

// Meter is one operation's share of the limits, carried in its context. It records the operation's cost as it is
// measured and, in a batch, charges it to the batch's Budget. Charges replace the operation's earlier ones (a
// request that one path declines and leaves to the next is measured again, not charged twice). One operation is
// charged by one goroutine at a time (the request's).
type Meter struct {
	budget *Budget // nil: a lone request, only measured
	cost   Cost    // charged so far
	// measured: each part of cost has been measured (by the limits, or whole, by Charge)
	docMeasured, answerMeasured bool
}

type meterKey struct{}

// WithMeter returns ctx with a meter (the one it carries, or a new one that only measures) and that meter: the
// top cache measures what the requests it stores cost, to charge a batch for them when it answers from memory.
func WithMeter(ctx context.Context) (context.Context, *Meter) {
	if m := meterFrom(ctx); m != nil {
		return ctx, m
	}
	m := &Meter{}
	return context.WithValue(ctx, meterKey{}, m), m
}

func meterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Cost returns what the operation was measured to cost; ok is false until both its document and its answer were.
func (m *Meter) Cost() (c Cost, ok bool) { return m.cost, m.docMeasured && m.answerMeasured }

// Charge charges the whole cost c, measured before, for an answer that does not run the operation again (the top
// cache's). It returns false, and charges nothing, when c does not fit the batch's budget: the request must then
// run, and be refused, the way it would be without the shortcut.
func Charge(ctx context.Context, c Cost) bool {
	m := meterFrom(ctx)
	if m == nil {
		return true
	}
	if _, ok := m.budget.charge(m.cost, c, false); !ok {
		return false
	}
	m.cost, m.docMeasured, m.answerMeasured = c, true, true
	return true
}

// chargeDocument charges an operation's complexity and fields, or returns the error that refuses it when they
// do not fit what its batch has left.
func chargeDocument(ctx context.Context, complexity, fields int) *gqlerror.Error {
	m := meterFrom(ctx)
	if m == nil {
		return nil
	}
	c := m.cost
	c.Complexity, c.Fields = complexity, fields
	used, ok := m.budget.charge(m.cost, c, false)
	if !ok {
		if max := m.budget.max.Fields; max > 0 && used.Fields+fields > max {
			return limitError(ReasonFields, fmt.Sprintf("the batch's documents select %d fields together with this "+
				"one; at most %d are allowed", used.Fields+fields, max))
		}
		return limitError(ReasonComplexity, fmt.Sprintf("the batch's operations have complexity %d together with "+
			"this one, which exceeds the limit of %d", used.Complexity+complexity, m.budget.max.Complexity))
	}
	m.cost, m.docMeasured = c, true
	return nil
}

// chargeAnswer charges the n bytes of an operation's answer, or returns the error that withholds it when they do
// not fit: over max for a lone request, over what the batch has left in a batch. A mutation's answer is always
// charged and never withheld.
func chargeAnswer(ctx context.Context, n, max int, mutation bool) *gqlerror.Error {
	m := meterFrom(ctx)
	if m == nil || m.budget == nil {
		if !mutation && max > 0 && n > max {
			return limitError(ReasonResponseSize, fmt.Sprintf("the answer would be %d bytes; at most %d are "+
				"allowed: ask for fewer rows or fields", n, max))
		}
		if m != nil {
			m.cost.Bytes, m.answerMeasured = n, true
		}
		return nil
	}
	c := m.cost
	c.Bytes = n
	used, ok := m.budget.charge(m.cost, c, mutation)
	if !ok {
		return limitError(ReasonResponseSize, fmt.Sprintf("the batch's answers would be %d bytes together with "+
			"this one; at most %d are allowed: ask for fewer rows or fields", used.Bytes+n, m.budget.max.Bytes))
	}
	m.cost, m.answerMeasured = c, true
	return nil
}

// charge charges an operation c instead of what it was charged before (old), if c fits what the others have
// used, or anyway with force; it returns what the others have used. A nil budget (a lone request) keeps no
// account and takes everything.
func (b *Budget) charge(old, c Cost, force bool) (others Cost, ok bool) {
	if b == nil {
		return Cost{}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	others = Cost{b.used.Complexity - old.Complexity, b.used.Fields - old.Fields, b.used.Bytes - old.Bytes}
	// Only what c raises is checked: forced answers may have taken the bytes past their bound, which must not
	// refuse a document its complexity and fields would let run.
	over := func(others, old, n, max int) bool { return max > 0 && n > old && others+n > max }
	if !force && (over(others.Complexity, old.Complexity, c.Complexity, b.max.Complexity) ||
		over(others.Fields, old.Fields, c.Fields, b.max.Fields) || over(others.Bytes, old.Bytes, c.Bytes, b.max.Bytes)) {
		return others, false
	}
	b.used = Cost{others.Complexity + c.Complexity, others.Fields + c.Fields, others.Bytes + c.Bytes}
	return others, true
}
