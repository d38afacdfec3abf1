package leaderboard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Rank reads without a script share plain reads. A lone rank read is small (a record, a ZRANK, a ZMSCORE) and two
// round trips of its own would cost Redis and the server more in reading, writing and waking than the commands
// themselves; so concurrent rank reads of one view and one set of fields go out as one plain read of all their
// players (ranksPlain). A read that finds its view idle goes out at once, so a light load waits for nothing;
// reads that come while one is in flight gather in the next group (at most maxGroupedRanks players), which goes
// out when that read ends. Each still gets a consistent read, taken after its call began.

// maxGroupedRanks bounds the players of one grouped read; a read that finds the next group full reads alone.
const maxGroupedRanks = 128

// rankGroups is the rank reads in flight and gathering, by view and fields.
type rankGroups struct {
	mu    sync.Mutex
	views map[rankGroupKey]*rankGroup // a view's next group; present (nil) while a read of the view is in flight
	// shared counts the rank reads answered by a read of more than one player (the tests check that some were).
	shared atomic.Int64
}

type rankGroupKey struct {
	board, window, period string
	arg                   int
}

// rankGroup is a grouped read: its players (in the order their reads joined), then its outcome.
type rankGroup struct {
	players  []string
	deadline time.Time       // the earliest deadline of its reads' contexts (zero: none has one)
	ctx      context.Context // the first read's, for its values
	done     chan struct{}   // closed when entries and err are set
	entries  map[string]*Entry
	err      error
}

// rankGrouped answers a rank read through a grouped plain read (see rankGroups).
func (s *Store) rankGrouped(ctx context.Context, v View, player string, arg int) (*Entry, error) {
	k := rankGroupKey{v.Board, string(v.Window), v.Period, arg}
	deadline, timed := ctx.Deadline()
	s.groups.mu.Lock()
	next, busy := s.groups.views[k]
	if !busy {
		s.groups.views[k] = nil // in flight
		s.groups.mu.Unlock()
		g := &rankGroup{players: []string{player}, ctx: ctx}
		s.readGroup(ctx, k, v, g)
		return g.entry(player)
	}
	if next != nil && len(next.players) >= maxGroupedRanks {
		s.groups.mu.Unlock()
		p, err := s.ranks(ctx, v, []string{player}, arg)
		if err != nil || len(p.Entries) == 0 {
			return nil, err
		}
		return &p.Entries[0], nil
	}
	if next == nil {
		next = &rankGroup{ctx: ctx, done: make(chan struct{})}
		s.groups.views[k] = next
	}
	next.players = append(next.players, player)
	if timed && (next.deadline.IsZero() || deadline.Before(next.deadline)) {
		next.deadline = deadline
	}
	s.groups.mu.Unlock()
	// As the batcher's callers (batcher.run): one with a deadline is held to it by the group's read, which is cut
	// at its members' earliest deadline, and does not wait on ctx.Done (that starts the server's request timer).
	if timed {
		<-next.done
		return next.entry(player)
	}
	select {
	case <-next.done:
		return next.entry(player)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readGroup reads the entries of g's players, hands them to g's reads, and then starts the view's next group, if
// one gathered meanwhile, or marks the view idle.
func (s *Store) readGroup(ctx context.Context, k rankGroupKey, v View, g *rankGroup) {
	p, err := s.ranks(ctx, v, g.players, k.arg)
	if len(g.players) > 1 {
		s.groups.shared.Add(int64(len(g.players)))
	}
	g.err = err
	if err == nil {
		g.entries = make(map[string]*Entry, len(p.Entries))
		for i := range p.Entries {
			g.entries[p.Entries[i].PlayerID] = &p.Entries[i]
		}
	}
	if g.done != nil {
		close(g.done)
	}
	s.groups.mu.Lock()
	next := s.groups.views[k]
	if next == nil {
		delete(s.groups.views, k)
		s.groups.mu.Unlock()
		return
	}
	s.groups.views[k] = nil // the next group is in flight; later reads gather in another
	s.groups.mu.Unlock()
	go func() {
		gctx := context.WithoutCancel(next.ctx)
		if !next.deadline.IsZero() {
			var cancel context.CancelFunc
			gctx, cancel = context.WithDeadline(gctx, next.deadline)
			defer cancel()
		}
		s.readGroup(gctx, k, v, next)
	}()
}

// entry is the outcome of a read of player in g: a copy of its entry (nil: no score), or g's error.
func (g *rankGroup) entry(player string) (*Entry, error) {
	if g.err != nil {
		return nil, g.err
	}
	e, ok := g.entries[player]
	if !ok {
		return nil, nil
	}
	c := *e
	return &c, nil
}
