package leaderboard

import (
	"context"
	"time"

	"github.com/leaderboard/leaderboard/internal/lru"
)

// frozenread.go: reads of a closed period that Redis no longer holds (its keys expired after the board's
// retention, or Redis lost them and the restore found them expired) answer from its frozen standings in the ledger
// (freeze.go), the newest version: top, rank, ranks and friends, aroundMe, size, periods and exports. The answer
// is what Redis answered while it held the period.

// frozenTTL is how long a process reuses what the ledger said of a period's frozen standings (a void's
// correction reaches other processes' reads within it).
const frozenTTL = 5 * time.Second

// frozenCacheEntries bounds the cache of frozen lookups (any client may name any past period).
const frozenCacheEntries = 10_000

// frozenLookup is what the ledger said of a period, and when.
type frozenLookup struct {
	fp  FrozenPeriod
	ok  bool
	key int64
	at  time.Time
}

// frozenCache remembers frozen lookups; made with the sequencer.
type frozenCache = lru.LRU[frozenLookup]

func newFrozenCache() *frozenCache {
	return lru.New[frozenLookup](frozenCacheEntries, frozenCacheEntries)
}

// frozenView is a closed period's frozen standings to answer a read from.
type frozenView struct {
	r   Resolved
	key int64 // the board's ledger key
	fp  FrozenPeriod
}

// frozen returns the frozen standings to answer a read of v from: with the ledger on, when the period v names
// (explicitly, or by default the latest season of a SEASON window, whose final standings stay the default for
// reads once it ended) is over, and Redis does not hold it. nil: read Redis. A default SEASON view it resolved to
// a running season names that season when it returns, so that the read does not ask for the latest season again.
func (s *Store) frozen(ctx context.Context, vp *View) (*frozenView, error) {
	v := *vp
	if s.seq == nil || v.Window == AllTime {
		return nil, nil
	}
	if v.Period == "" { // the current period: open for a calendar window, so only a SEASON window's may be over
		if v.Window != "" && v.Window != Season {
			return nil, nil
		}
		b, err := s.Board(ctx, v.Board)
		if err != nil {
			return nil, err
		}
		if v.Window == "" && b.DefaultWindow() != Season {
			return nil, nil
		}
		si, err := s.LatestSeason(ctx, b.ID)
		if err != nil || si == nil {
			return nil, err
		}
		v.Window, v.Period = Season, si.ID
		if si.Running { // Redis's, read as that season
			*vp = v
			return nil, nil
		}
	}
	r, err := s.Resolve(ctx, v)
	if err != nil {
		return nil, err
	}
	if r.Window == AllTime {
		return nil, nil
	}
	if r.Window != Season {
		start, err := ParsePeriod(r.Window, r.Period, r.Board.Location())
		if err != nil || !r.Board.closedAt(nextStart(r.Window, start, 1), s.cfg.Clock()) {
			return nil, err // open: Redis has it, or nobody played it yet
		}
	}
	n, err := s.rdb.Exists(ctx, s.stateKey(r.Board.ID, r.Window, r.Period)).Result()
	if err != nil {
		return nil, redisError(err)
	}
	if n == 1 {
		return nil, nil
	}
	look, err := s.lookupFrozen(ctx, r.Board.ID, r.Window, r.Period)
	if err != nil || !look.ok {
		return nil, err
	}
	return &frozenView{r: r, key: look.key, fp: look.fp}, nil
}

// lookupFrozen asks the ledger for a period's newest frozen standings, or reuses a recent answer.
func (s *Store) lookupFrozen(ctx context.Context, board string, w Window, period string) (frozenLookup, error) {
	ck := board + "\x00" + string(w) + "\x00" + period
	if l, ok := s.seq.frozen.Get(ck); ok && time.Since(l.at) < frozenTTL {
		return l, nil
	}
	lb, ok, err := s.seq.ledger.Board(ctx, board)
	if err != nil || !ok {
		return frozenLookup{}, err
	}
	l := frozenLookup{key: lb.Key, at: time.Now()}
	if l.fp, l.ok, err = s.seq.ledger.Frozen(ctx, lb.Key, w, period); err != nil {
		return frozenLookup{}, err
	}
	s.seq.frozen.Add(ck, l, 1)
	return l, nil
}

// forgetFrozen drops what this process remembers of a period's frozen standings (a correction wrote a version).
func (s *Store) forgetFrozen(board string, w Window, period string) {
	s.seq.frozen.Add(board+"\x00"+string(w)+"\x00"+period, frozenLookup{}, 1)
}

// page is a Page of frozen rows, with the fields arg asks for.
func (f *frozenView) page(rows []Entry, arg int) *Page {
	p := &Page{Board: f.r.Board.ID, Order: f.r.Board.Order, Window: f.r.Window, Period: f.r.Period, Size: f.fp.Size,
		Entries: rows}
	for i := range p.Entries {
		e := &p.Entries[i]
		e.TopPercent = TopPercent(e.Rank, f.fp.Size)
		if arg&int(FieldUpdatedAt) == 0 {
			e.UpdatedAt = time.Time{}
		}
		if arg&int(FieldTieRank) == 0 {
			e.TieRank = 0
		}
		if arg&int(FieldMeta) == 0 {
			e.DisplayName, e.Metadata = nil, nil
		}
	}
	if p.Entries == nil {
		p.Entries = []Entry{}
	}
	return p
}

func (s *Store) frozenTop(ctx context.Context, f *frozenView, offset, first int) (*Page, error) {
	rows, err := s.seq.ledger.FrozenRows(ctx, f.key, f.r.Window, f.r.Period, f.fp.Version, int64(offset), first)
	if err != nil {
		return nil, err
	}
	return f.page(rows, int(AllFields)), nil
}

// frozenRanks answers Ranks: the players' rows in the order given.
func (s *Store) frozenRanks(ctx context.Context, f *frozenView, players []string, arg int) (*Page, error) {
	rows, err := s.seq.ledger.FrozenPlayers(ctx, f.key, f.r.Window, f.r.Period, f.fp.Version, players)
	if err != nil {
		return nil, err
	}
	by := make(map[string]Entry, len(rows))
	for _, e := range rows {
		by[e.PlayerID] = e
	}
	ordered := make([]Entry, 0, len(rows))
	for _, p := range players {
		if e, ok := by[p]; ok {
			ordered = append(ordered, e)
			delete(by, p)
		}
	}
	return f.page(ordered, arg), nil
}

func (s *Store) frozenAround(ctx context.Context, f *frozenView, player string, radius, arg int) ([]Entry, error) {
	me, err := s.seq.ledger.FrozenPlayers(ctx, f.key, f.r.Window, f.r.Period, f.fp.Version, []string{player})
	if err != nil || len(me) == 0 {
		return []Entry{}, err
	}
	start, stop := aroundWindow(me[0].Rank-1, f.fp.Rows, radius)
	rows, err := s.seq.ledger.FrozenRows(ctx, f.key, f.r.Window, f.r.Period, f.fp.Version, start, int(stop-start+1))
	if err != nil {
		return nil, err
	}
	return f.page(rows, arg).Entries, nil
}

// frozenPeriods adds to a window's closed periods (newest first, from Redis) the frozen ones Redis no longer
// holds, in the same order.
func (s *Store) frozenPeriods(ctx context.Context, b *Board, w Window, have []ClosedPeriod) ([]ClosedPeriod, error) {
	if s.seq == nil || w == AllTime {
		return have, nil
	}
	lb, ok, err := s.seq.ledger.Board(ctx, b.ID)
	if err != nil || !ok {
		return have, err
	}
	fps, err := s.seq.ledger.FrozenPeriods(ctx, lb.Key, w)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(have))
	for _, p := range have {
		seen[p.Period] = true
	}
	out := have
	added := false
	for _, fp := range fps {
		if !seen[fp.Period] && fp.Size > 0 {
			end := fp.EndedAt
			if w != Season { // a calendar period ends at a local midnight, shown as Periods shows it from Redis
				end = end.In(b.Location())
			}
			out = append(out, ClosedPeriod{Period: fp.Period, Size: fp.Size, EndedAt: end})
			added = true
		}
	}
	if !added {
		return have, nil
	}
	// Newest end first (insertion: the lists are short and each sorted already).
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].EndedAt.After(out[j-1].EndedAt); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}
