package leaderboard

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Rank and aroundMe reads without a script share plain reads. A lone rank read is small (a record, a ZRANK, a
// ZMSCORE) and two round trips of its own would cost Redis and the server more in reading, writing and waking than
// the commands themselves; an aroundMe read without a script takes three (aroundplain.go). So concurrent reads of
// one view, one kind (rank, or aroundMe of one radius) and one set of fields go out as one plain read of all their
// players. A read that finds its view idle goes out at once, so a light load waits for nothing (a lone aroundMe
// read runs around.lua); reads that come while one is in flight gather in the next group (at most
// maxGroupedRanks players), which goes out when that read ends. Each still gets a consistent read, taken after
// its call began.

// maxGroupedRanks bounds the players of one grouped read; a read that finds the next group full reads alone.
const maxGroupedRanks = 128

// maxGroupedRows bounds the rows the aroundMe windows of one grouped read take (one transaction holds Redis, and
// the writes behind it, while it runs): 2,048 is 128 reads of radius 5, or 9 of radius 100. A row whose name or
// updatedAt is asked counts once more for each (a field of the names hash, a record: a command's work each).
const maxGroupedRows = 2048

// capacity is how many players a group of k's reads takes.
func (k rankGroupKey) capacity() int {
	if k.radius == rankRead {
		return maxGroupedRanks
	}
	per := 2*k.radius + 1 + 2*aroundMargin // the rows one read takes
	rows := per
	for _, f := range []Fields{FieldUpdatedAt, FieldMeta} {
		if k.arg&int(f) != 0 {
			rows += per
		}
	}
	return max(1, min(maxGroupedRanks, maxGroupedRows/rows))
}

// rankGroups is the grouped reads in flight and gathering, by view, kind and fields.
type rankGroups struct {
	mu    sync.Mutex
	views map[rankGroupKey]*rankGroup // a view's next group; present (nil) while a read of the view is in flight
	// shared counts the reads answered by a read of more than one player (the tests check that some were).
	shared atomic.Int64
}

type rankGroupKey struct {
	board, window, period string
	arg                   int
	radius                int // an aroundMe read's radius; rankRead for a rank read
}

// rankRead is the radius of a rankGroupKey of rank reads.
const rankRead = -1

// rankGroup is a grouped read: its players (in the order their reads joined), then its outcome.
type rankGroup struct {
	players  []string
	deadline time.Time          // the earliest deadline of its reads' contexts (zero: none has one)
	ctx      context.Context    // the first read's, for its values
	done     chan struct{}      // closed when entries and err are set
	entries  map[string][]Entry // by player: its rank read's entry, or its aroundMe read's; none: no score
	err      error
}

// rankGrouped answers a rank read through a grouped plain read (see rankGroups).
func (s *Store) rankGrouped(ctx context.Context, v View, player string, arg int) (*Entry, error) {
	es, err := s.grouped(ctx, rankGroupKey{v.Board, string(v.Window), v.Period, arg, rankRead}, v, player)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return &es[0], nil
}

// aroundGrouped answers an aroundMe read through a grouped plain read (see rankGroups).
func (s *Store) aroundGrouped(ctx context.Context, v View, player string, radius, arg int) ([]Entry, error) {
	es, err := s.grouped(ctx, rankGroupKey{v.Board, string(v.Window), v.Period, arg, radius}, v, player)
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []Entry{}
	}
	return es, nil
}

// grouped answers a read of player (the kind and fields of k) on view v through a grouped read.
func (s *Store) grouped(ctx context.Context, k rankGroupKey, v View, player string) ([]Entry, error) {
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
	if next != nil && len(next.players) >= k.capacity() {
		s.groups.mu.Unlock()
		out, err := s.readPlayers(ctx, k, v, []string{player})
		if err != nil {
			return nil, err
		}
		return out[player], nil
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
	} else {
		select {
		case <-next.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	es, err := next.entry(player)
	if err != nil && next.cutShort(deadline, timed) {
		// The group's read failed at another read's earlier deadline; this one still has time: it reads alone.
		out, err := s.readPlayers(ctx, k, v, []string{player})
		if err != nil {
			return nil, err
		}
		return out[player], nil
	}
	return es, err
}

// cutShort reports whether g's read ended past its deadline while a member whose own deadline (if timed) is
// later still has time.
func (g *rankGroup) cutShort(deadline time.Time, timed bool) bool {
	if g.deadline.IsZero() || !time.Now().After(g.deadline) {
		return false
	}
	return !timed || deadline.After(g.deadline) && time.Now().Before(deadline)
}

// readGroup reads the entries of g's players, hands them to g's reads, and then starts the view's next group, if
// one gathered meanwhile, or marks the view idle.
func (s *Store) readGroup(ctx context.Context, k rankGroupKey, v View, g *rankGroup) {
	g.entries, g.err = s.readPlayers(ctx, k, v, g.players)
	if len(g.players) > 1 {
		s.groups.shared.Add(int64(len(g.players)))
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

// readPlayers reads the entries of players (the kind and fields of k) on view v, by player.
func (s *Store) readPlayers(ctx context.Context, k rankGroupKey, v View, players []string) (map[string][]Entry, error) {
	if k.radius != rankRead {
		return s.aroundMany(ctx, v, players, k.radius, k.arg)
	}
	p, err := s.ranks(ctx, v, players, k.arg)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Entry, len(p.Entries))
	for i := range p.Entries {
		out[p.Entries[i].PlayerID] = p.Entries[i : i+1 : i+1]
	}
	return out, nil
}

// entry is the outcome of a read of player in g: a copy of its entries (none: no score), or g's error.
func (g *rankGroup) entry(player string) ([]Entry, error) {
	if g.err != nil {
		return nil, g.err
	}
	return slices.Clone(g.entries[player]), nil
}
