package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// View names a ranking: a board, a window (zero: the board's first) and a period (empty: the current one).
type View struct {
	Board  string
	Window Window
	Period string
}

// Resolved is a View with its board loaded and its window and period filled in.
type Resolved struct {
	Board  *Board
	Window Window
	Period string
}

// windowBoard loads a board for a call on its window w ("": its default), refusing a window the board does not
// keep. The cached definition may be of a board deleted and created again since, with other windows, which this
// store was not told of (a hub's store hears a deletion only on a board it watches), and no script runs to find it
// stale: the definition is read again before a refusal.
func (s *Store) windowBoard(ctx context.Context, id string, w Window) (*Board, error) {
	c, err := s.loadBoard(ctx, id)
	if err != nil {
		return nil, err
	}
	if w == "" || c.b.HasWindow(w) {
		return c.b, nil
	}
	s.boards.CompareAndDelete(id, c)
	if c, err = s.loadBoard(ctx, id); err != nil {
		return nil, err
	}
	if !c.b.HasWindow(w) {
		return nil, errNoWindow(c.b.ID, w)
	}
	return c.b, nil
}

// Resolve loads the board of v and checks its window and period.
func (s *Store) Resolve(ctx context.Context, v View) (Resolved, error) {
	b, err := s.windowBoard(ctx, v.Board, v.Window)
	if err != nil {
		return Resolved{}, err
	}
	w := v.Window
	if w == "" {
		w = b.DefaultWindow()
	}
	p := v.Period
	if p == "" {
		if p, err = s.CurrentPeriod(ctx, b, w); err != nil {
			return Resolved{}, err
		}
	} else if _, err := ParsePeriod(w, p, b.Location()); err != nil {
		return Resolved{}, err
	}
	return Resolved{Board: b, Window: w, Period: p}, nil
}

// Top returns ranks offset+1 .. offset+first (first at most MaxFirst) of a ranking. On exactTop boards only the
// exact tier can be listed.
func (s *Store) Top(ctx context.Context, v View, offset, first int) (*Page, error) {
	if first < 0 || first > MaxFirst {
		return nil, errorf(Invalid, "first must be between 0 and %d", MaxFirst)
	}
	if offset < 0 || offset > MaxOffset {
		return nil, errorf(Invalid, "offset must be between 0 and %d", MaxOffset)
	}
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return nil, err
		}
		return s.frozenTop(ctx, f, offset, first)
	}
	var p *Page
	err := s.byLayout(ctx, v, func(r Resolved, cb *cachedBoard) (err error) {
		p, err = s.topSharded(ctx, r, cb, offset, first)
		return err
	}, func() (err error) {
		p, err = s.read(ctx, v, topScript, offset, first)
		return err
	})
	return p, err
}

// Fields are the parts of an Entry that a read fills besides the player id, rank, approximate flag, score and
// topPercent, which every read has. A read fills them all unless told otherwise (Only); a part left out is its
// zero value. Each costs Redis work: a tie rank a ZCOUNT (walks of the board's skiplist), an updatedAt a record
// lookup per row of a list, names and metadata an HMGET.
type Fields uint8

const (
	FieldUpdatedAt Fields = 1 << iota // Entry.UpdatedAt
	FieldTieRank                      // Entry.TieRank
	FieldMeta                         // Entry.DisplayName and Entry.Metadata
	// FieldPreviousRank is a submission's Result.PreviousRank (reads ignore it): without it a player that ranks
	// below LiveTop after an improvement (BEST boards) has its rank before left unread, a ZRANK saved. Its value
	// skips 8, the read scripts' version flag (readVersion).
	FieldPreviousRank Fields = 16
	// FieldRank is a submission's Entry.Rank, Approximate and TopPercent and Result.Size (reads ignore it: they
	// rank what they return). A sharded board places a submission on its other shards for them: without it, an
	// item without an EventID whose player ranks below MaxFirst on its own shard (so on the board) before and after
	// is not placed, and its rank, topPercent and size are 0 (one ZCOUNT pipeline per other shard saved).
	FieldRank Fields = 32
	AllFields        = FieldUpdatedAt | FieldTieRank | FieldMeta | FieldPreviousRank | FieldRank
)

// ReadOption changes what a read returns, or a submission's result (Only; a submission's updatedAt comes with
// the write, and one with an EventID fills every part).
type ReadOption struct {
	fields  Fields
	only    bool // fields is set
	version bool
}

// Only makes a read fill only the parts f of its entries (and what every entry has).
func Only(f Fields) ReadOption { return ReadOption{fields: f & AllFields, only: true} }

// WithVersion makes Ranks return, in Page.Epoch and Page.Version, the board's change event that its entries
// follow: every event up to that version is reflected in them and no later one (the live hub applies later
// events to them).
func WithVersion() ReadOption { return ReadOption{version: true} }

// readVersion is the script's flag for WithVersion (ranks.lua).
const readVersion = 8

// readArg returns the script argument for opts: the fields (the last Only, else all) and the version flag.
func readArg(opts []ReadOption) int {
	f, v := AllFields, 0
	for _, o := range opts {
		if o.only {
			f = o.fields
		}
		if o.version {
			v = readVersion
		}
	}
	return int(f) | v
}

// read runs a read script on a view and reads its {size, entry...} reply (page): ARGV are the definition's
// SHA-1, the window code, the period and args.
func (s *Store) read(ctx context.Context, v View, script *script, args ...any) (*Page, error) {
	var p *Page
	err := s.readWith(ctx, v, script, args, func(r Resolved, cmd *redis.Cmd) (err error) {
		p, err = s.page(r, cmd)
		return err
	})
	return p, err
}

// readWith runs a read script on a view (ARGV as for read) and hands its outcome to parse, again when the board's
// definition changed under it (fresh).
func (s *Store) readWith(ctx context.Context, v View, script *script, args []any,
	parse func(Resolved, *redis.Cmd) error) error {
	return s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		if r.Board.Sharded() {
			return errLayout // a script on shard 0 alone
		}
		argv := make([]any, 0, 3+len(args))
		argv = append(argv, r.Board.sum, windowCodes[r.Window], r.Period)
		argv = append(argv, args...)
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		return parse(r, s.run(ctx, script, []string{s.keyBase(r.Board.ID)}, argv...))
	})
}

// rank.lua's header: 5 arguments (definition, window, period, fields, number of players), of which the 5th is the
// number of players, its items.
const (
	rankHeaderArgs = 5
	rankCountArg   = 4
)

// Rank returns a player's entry, or nil when the player has no score in the ranking. Concurrent Rank calls on one
// board may share one read: without a script (rankgroup.go) where the plain read fits (boards without exactTop, no
// tie rank asked), else one call of rank.lua (merged by the batcher when Config.BatchLanes is set). Each is still a
// consistent read of its own, taken after that call began.
func (s *Store) Rank(ctx context.Context, v View, player string, opts ...ReadOption) (*Entry, error) {
	arg := readArg(opts)
	if arg&readVersion != 0 { // a versioned read: ranks.lua's reply carries the version
		p, err := s.Ranks(ctx, v, []string{player}, opts...)
		if err != nil || len(p.Entries) == 0 {
			return nil, err
		}
		return &p.Entries[0], nil
	}
	if err := checkID("player id", player); err != nil {
		return nil, err
	}
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return nil, err
		}
		p, err := s.frozenRanks(ctx, f, []string{player}, arg)
		if err != nil || len(p.Entries) == 0 {
			return nil, err
		}
		return &p.Entries[0], nil
	}
	b, err := s.Board(ctx, v.Board)
	if err != nil {
		return nil, err
	}
	if plainRanksFit(b, arg) {
		return s.rankGrouped(ctx, v, player, arg) // sharded boards too: their plain reads group as well
	}
	if b.Sharded() {
		p, err := s.ranks(ctx, v, []string{player}, arg)
		if err != nil || len(p.Entries) == 0 {
			return nil, err
		}
		return &p.Entries[0], nil
	}
	var e *Entry
	err = s.readWith(ctx, v, rankScript, []any{arg, 1, player}, func(r Resolved, cmd *redis.Cmd) error {
		reply, err := cmd.Slice()
		if err == nil && len(reply) != 1 {
			err = fmt.Errorf("rank script returned %d replies for 1 player", len(reply))
		}
		if err != nil {
			return redisError(err)
		}
		row, ok := reply[0].([]any) // the player's page: {size} or {size, entry}
		if !ok {
			return redisError(fmt.Errorf("unexpected rank reply %T", reply[0]))
		}
		p, err := s.pageOf(r, row)
		e = nil
		if err == nil && len(p.Entries) > 0 {
			e = &p.Entries[0]
		}
		return err
	})
	if errors.Is(err, errLayout) { // re-created with shards since b was cached: ranks chooses again
		p, err := s.ranks(ctx, v, []string{player}, arg)
		if err != nil || len(p.Entries) == 0 {
			return nil, err
		}
		return &p.Entries[0], nil
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Ranks returns the entries of the given players (at most MaxFriends+1) in one consistent read, in the order
// given; players without a score are left out.
func (s *Store) Ranks(ctx context.Context, v View, players []string, opts ...ReadOption) (*Page, error) {
	if len(players) > MaxFriends+1 {
		return nil, errorf(Invalid, "at most %d player ids", MaxFriends)
	}
	for _, p := range players {
		if err := checkID("player id", p); err != nil {
			return nil, err
		}
	}
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return nil, err
		}
		return s.frozenRanks(ctx, f, players, readArg(opts))
	}
	return s.ranks(ctx, v, players, readArg(opts))
}

// Friends returns the player and the given friends who have a score, in rank order, with their board ranks.
func (s *Store) Friends(ctx context.Context, v View, player string, friends []string, opts ...ReadOption) ([]Entry, error) {
	if len(friends) > MaxFriends {
		return nil, errorf(Invalid, "at most %d friend ids", MaxFriends)
	}
	ids := make([]string, 0, len(friends)+1)
	seen := make(map[string]bool, len(friends)+1)
	for _, id := range append([]string{player}, friends...) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	p, err := s.Ranks(ctx, v, ids, opts...)
	if err != nil {
		return nil, err
	}
	desc := p.Order == Desc
	slices.SortStableFunc(p.Entries, func(a, b Entry) int {
		if a.Rank != b.Rank {
			return int(a.Rank - b.Rank)
		}
		// Estimated ranks can coincide; the better score first, then the id, so the order is stable.
		if a.Score != b.Score {
			if (a.Score > b.Score) == desc {
				return -1
			}
			return 1
		}
		return strings.Compare(a.PlayerID, b.PlayerID)
	})
	return p.Entries, nil
}

// Around returns up to radius (at most MaxRadius) entries above and below the player, the player included, in
// rank order, filled in at the edges. Empty when the player has no score. Concurrent Around calls on one view,
// radius and set of fields may share one read without a script (rankgroup.go, aroundplain.go) where it fits
// (boards without exactTop; no tie rank asked), else each is one call of around.lua; each is still a consistent
// read of its own, taken after that call began.
func (s *Store) Around(ctx context.Context, v View, player string, radius int, opts ...ReadOption) ([]Entry, error) {
	if radius < 0 || radius > MaxRadius {
		return nil, errorf(Invalid, "radius must be between 0 and %d", MaxRadius)
	}
	if err := checkID("player id", player); err != nil {
		return nil, err
	}
	arg := readArg(opts) & int(FieldUpdatedAt|FieldTieRank|FieldMeta) // what around.lua reads
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return nil, err
		}
		return s.frozenAround(ctx, f, player, radius, arg)
	}
	b, err := s.Board(ctx, v.Board)
	if err != nil {
		return nil, err
	}
	if plainAroundFit(b, arg) {
		return s.aroundGrouped(ctx, v, player, radius, arg) // sharded boards too: their plain reads group as well
	}
	var out []Entry
	err = s.byLayout(ctx, v, func(r Resolved, cb *cachedBoard) (err error) {
		out, err = s.aroundSharded(ctx, r, cb, player, radius, arg)
		return err
	}, func() error {
		p, err := s.read(ctx, v, aroundScript, player, radius, arg)
		if err != nil {
			return err
		}
		out = p.Entries
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Size returns the number of players with a score in the ranking.
func (s *Store) Size(ctx context.Context, v View) (int64, error) {
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return 0, err
		}
		return f.fp.Size, nil
	}
	var n int64
	err := s.byLayout(ctx, v, func(r Resolved, cb *cachedBoard) (err error) {
		n, err = s.sizeSharded(ctx, r, cb)
		return err
	}, func() (err error) {
		n, err = s.sizeUnsharded(ctx, v)
		return err
	})
	return n, err
}

// sizeUnsharded is Size on a board of one shard: its count, read with its definition (in one MULTI), so that a
// board created again since its definition was cached is read again as it is now (fresh).
func (s *Store) sizeUnsharded(ctx context.Context, v View) (int64, error) {
	var n int64
	err := s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		if r.Board.Sharded() {
			return errLayout // shard 0's count alone
		}
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		var def *redis.StringCmd
		var cnt *redis.StringCmd
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			def = p.Get(ctx, keyDef.of(s.keyBase(r.Board.ID)))
			cnt = p.HGet(ctx, s.stateKey(r.Board.ID, r.Window, r.Period), "cnt")
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return redisError(err)
		}
		if d, err := def.Result(); err != nil || defSum(d) != r.Board.sum {
			return errStaleDef // deleted (the retry's Resolve says NOT_FOUND), or created again
		}
		n, err = cnt.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return redisError(err)
		}
		return nil
	})
	return n, err
}

// page reads a {size, entry...} reply, or a {size, epoch, version, entry...} one (a read WithVersion: its rows
// start with a string where an entry starts with a list).
func (s *Store) page(r Resolved, cmd *redis.Cmd) (*Page, error) {
	reply, err := cmd.Slice()
	if err != nil {
		return nil, redisError(err)
	}
	return s.pageOf(r, reply)
}

// pageOf is page of a reply's values (rank.lua answers one such page per player).
func (s *Store) pageOf(r Resolved, reply []any) (*Page, error) {
	if len(reply) == 0 {
		return nil, redisError(fmt.Errorf("empty reply"))
	}
	p := &Page{Board: r.Board.ID, Order: r.Board.Order, Window: r.Window, Period: r.Period, Size: toInt(reply[0]),
		Entries: make([]Entry, 0, len(reply)-1)}
	rows := reply[1:]
	if len(rows) >= 2 {
		if ep, ok := rows[0].(string); ok {
			p.Epoch, p.Version, p.Versioned = ep, toInt(rows[1]), true
			rows = rows[2:]
		}
	}
	for _, row := range rows {
		e, err := parseEntry(r.Board, row, p.Size)
		if err != nil {
			return nil, redisError(err)
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}
