package leaderboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ledgered.go: the writes of a store with a ledger (Config.Ledger). A write is recorded in the ledger first and
// applied to the index after, in the ledger's order (sequencer.go), through the ledgered scripts (the same
// scripts behind the gate in common.lua; ledgerapply.go makes their calls). A restore applies the same events the same way (restore.go), so the
// index is a function of the ledger.

// boardFor returns the cached view of a board for a ledgered call: the definition cache's, or for a restore the
// definition the ledger recorded (not cached: the board is not readable until the restore is done).
func (s *Store) boardFor(ctx context.Context, board string, restore bool) (*cachedBoard, error) {
	if restore {
		v, ok := s.restoring.Load(board)
		if !ok {
			return nil, errRestoring(board)
		}
		return v.(*cachedBoard), nil
	}
	return s.loadBoard(ctx, board)
}

// submitLedgered is SubmitMany with a ledger: each board's valid items are one write of its sequencer worker.
func (s *Store) submitLedgered(ctx context.Context, subs []Submission, fields int) []Outcome {
	out := make([]Outcome, len(subs))
	now := s.cfg.Clock()
	type group struct {
		w   *ledgerWrite
		idx []int
	}
	groups := map[string]*group{}
	var order []*group
	for i, sub := range subs {
		if err := checkID("board id", sub.Board); err != nil {
			out[i].Err = err
			continue
		}
		g := groups[sub.Board]
		if g == nil {
			g = &group{w: &ledgerWrite{board: sub.Board, kind: EventSubmit, fields: fields}}
			groups[sub.Board] = g
			order = append(order, g)
		}
		e, err := s.recordSubmission(ctx, sub, now)
		if err != nil {
			out[i].Err = err
			continue
		}
		g.w.events = append(g.w.events, e)
		g.idx = append(g.idx, i)
	}
	write := func(g *group) {
		if err := s.seq.do(ctx, g.w); err != nil {
			err = s.ledgerError(ctx, g.w.board, err)
			for _, i := range g.idx {
				out[i].Err = err
			}
			return
		}
		for k, i := range g.idx {
			out[i] = g.w.outs[k]
		}
	}
	if len(order) == 1 { // one board, the usual request: no goroutine to hand it to
		if len(order[0].idx) > 0 {
			write(order[0])
		}
		return out
	}
	var wg sync.WaitGroup
	for _, g := range order {
		if len(g.idx) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			write(g)
		}()
	}
	wg.Wait()
	return out
}

// recordSubmission validates a submission as the submit script's arguments would (so that what the ledger
// records is what the index takes) and returns it as the event to record.
func (s *Store) recordSubmission(ctx context.Context, sub Submission, now time.Time) (LedgerEvent, error) {
	v, err := s.loadBoard(ctx, sub.Board)
	if err != nil {
		if ErrorCode(err) == NotFound {
			return LedgerEvent{}, s.missing(ctx, sub.Board)
		}
		return LedgerEvent{}, err
	}
	if _, _, err := s.appendItem(nil, v.b, sub, now, ""); err != nil {
		return LedgerEvent{}, err
	}
	if _, ok := AssignedSeq(sub.EventID); ok {
		return LedgerEvent{}, errorf(Invalid, "eventId %q has the form of the ones the ledger assigns (#<number>)",
			sub.EventID)
	}
	e := LedgerEvent{Kind: EventSubmit, Player: sub.Player, Score: sub.Score, EventID: sub.EventID,
		Name: sub.DisplayName, Fingerprint: fingerprint(sub, strconv.FormatFloat(sub.Score, 'g', -1, 64))}
	if !sub.AchievedAt.IsZero() {
		e.AchievedAt = time.UnixMilli(sub.AchievedAt.UnixMilli()) // what the ledger keeps
	}
	if sub.Metadata != nil {
		m, err := checkMetadata(sub.Metadata)
		if err != nil {
			return LedgerEvent{}, err
		}
		e.Meta = &m
	}
	return e, nil
}

// missing is the error of a request on a board Redis does not hold: NOT_FOUND, or UNAVAILABLE while the ledger
// holds the board and it is restored (the restore starts here), or while the ledger cannot be asked.
func (s *Store) missing(ctx context.Context, board string) error {
	if s.seq == nil {
		return errorf(NotFound, "no leaderboard with id %q", board)
	}
	held, err := s.seq.holds(ctx, board)
	if err != nil {
		// Redis lacks the board and the ledger cannot say whether it holds it: not NOT_FOUND (a board Redis lost is
		// never NOT_FOUND, and a live subscription ends on NOT_FOUND).
		return &Error{Code: Unavailable, Message: fmt.Sprintf("leaderboard %q cannot be found in the data store "+
			"now, and the ledger is unreachable; try again", board), Err: err}
	}
	if held {
		if !s.seq.creating(board) { // else its creator applies it now
			s.seq.restore.start(s.seq, board)
		}
		return errRestoring(board)
	}
	return errorf(NotFound, "no leaderboard with id %q", board)
}

// unlisted completes a board list (Redis's: ids, sorted) with the boards the ledger holds: those Redis holds
// though its list lacked them (created or restored since it was read) are added; one Redis lacks (a FLUSHALL, a
// restart without persistence) is UNAVAILABLE until it is restored, not a list without it. It starts no restore
// (the board may be being created: recorded, not applied yet); the ledger check does, and so does any request to
// the board. The ledger's list is read at most once per boardListTTL, by one caller at a time (the others take
// the last one); while it cannot be read, the last one serves, and Redis's list answers when it holds every board
// of it (reads go on).
func (q *sequencer) unlisted(ctx context.Context, ids []string) ([]string, error) {
	var added []string
	for _, id := range q.ledgerIDs(ctx) {
		if _, ok := slices.BinarySearch(ids, id); ok {
			continue
		}
		ok, err := q.s.Exists(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			added = append(added, id)
			continue
		}
		// Deleted since the ledger's list was read, or not: the ledger says (a board Redis lacks is rare).
		if _, held, err := q.ledger.Board(ctx, id); err != nil || held {
			return nil, errRestoring(id)
		}
	}
	if len(added) == 0 {
		return ids, nil
	}
	out := slices.Concat(ids, added) // a new slice: ids is the store's cached list
	slices.Sort(out)
	return out, nil
}

// ledgerIDs returns the ids of the ledger's live boards as last read (unlisted), reading them again when that
// read is older than boardListTTL and no other caller reads them. Callers that come while the first read runs
// wait for it: there is no last read to take yet.
func (q *sequencer) ledgerIDs(ctx context.Context) []string {
	l := &q.list
	l.mu.Lock()
	for l.reading != nil && l.read.IsZero() {
		wait := l.reading
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil
		}
		l.mu.Lock()
	}
	ids := l.ids
	if l.reading != nil || time.Since(l.read) < boardListTTL {
		l.mu.Unlock()
		return ids
	}
	done := make(chan struct{})
	l.reading = done
	l.mu.Unlock()
	boards, err := q.ledger.Boards(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(done)
	l.reading, l.read = nil, time.Now()
	if err != nil {
		return ids
	}
	l.ids = make([]string, len(boards))
	for i, b := range boards {
		l.ids[i] = b.ID
	}
	return l.ids
}

// ledgerList is the last read of the ledger's board ids (sequencer.ledgerIDs).
type ledgerList struct {
	mu      sync.Mutex
	ids     []string
	read    time.Time     // when ids were read, or a read failed; zero: never
	reading chan struct{} // closed when the read under way ends; nil: none
}

// holds reports whether the ledger holds a live board with this id (cached for a moment: every request on a
// missing board asks), or the error of a ledger that cannot say.
func (q *sequencer) holds(ctx context.Context, board string) (bool, error) {
	if v, ok := q.known.Load(board); ok {
		k := v.(knownBoard)
		if time.Since(k.at) < knownTTL {
			return k.held, nil
		}
	}
	_, ok, err := q.ledger.Board(ctx, board)
	if err != nil {
		return false, err
	}
	q.known.Store(board, knownBoard{held: ok, at: time.Now()})
	return ok, nil
}

type knownBoard struct {
	held bool
	at   time.Time
}

// knownTTL is how long the answer to "does the ledger hold board X" is reused.
const knownTTL = time.Second

// removeLedgered, seasonLedgered, createLedgered and deleteLedgered record a write of one event, then apply it.
func (s *Store) writeOne(ctx context.Context, board string, e LedgerEvent) (any, error) {
	w, err := s.writeEvent(ctx, board, e)
	if err != nil {
		return nil, err
	}
	return w.reply, nil
}

func (s *Store) writeEvent(ctx context.Context, board string, e LedgerEvent) (*ledgerWrite, error) {
	w := &ledgerWrite{board: board, kind: e.Kind, events: []LedgerEvent{e}}
	if err := s.seq.do(ctx, w); err != nil {
		return nil, s.ledgerError(ctx, board, err)
	}
	return w, nil
}

// createLedgered records a board's creation, then applies it. A board Redis holds without a high-water mark
// was created before the ledger was on: the ledger cannot take it (errNotLedgered).
func (s *Store) createLedgered(ctx context.Context, id, def string) error {
	base := s.makeKeyBase(id)
	st, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, keyDef.of(base))
		p.HGet(ctx, keyCounters.of(base), "lsq")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return redisError(err)
	}
	if cur := st[0].(*redis.StringCmd).Val(); cur != "" && st[1].(*redis.StringCmd).Val() == "" {
		if cur != def {
			return errorf(Conflict, "a board with this id exists with a different definition")
		}
		return errNotLedgered(id)
	}
	// Recorded, the board is in the ledger before its definition is in Redis: the ledger check and requests to it
	// must not take it for lost meanwhile (a restore would answer its creator UNAVAILABLE). A creation whose caller
	// stopped waiting goes on: its mark stays until it expires (sequencer.creating).
	began := time.Now()
	s.seq.creations.Store(id, began)
	_, err = s.writeOne(ctx, id, LedgerEvent{Kind: EventCreate, Args: []byte(def)})
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.seq.creations.CompareAndDelete(id, began)
	}
	return err
}

// removeLedgered is RemovePlayer with a ledger.
func (s *Store) removeLedgered(ctx context.Context, board, player string) (bool, error) {
	if _, err := s.loadBoard(ctx, board); err != nil {
		return false, err
	}
	r, err := s.writeOne(ctx, board, LedgerEvent{Kind: EventRemove, Player: player})
	if err != nil {
		return false, err
	}
	if r == nil {
		return true, nil // applied before (by a catch-up): it was there to remove
	}
	reply, _ := r.([]any)
	if len(reply) != 2 {
		return false, redisError(fmt.Errorf("remove script returned %v", r))
	}
	removed, kept := toInt(reply[0]), toInt(reply[1])
	if removed == 0 && kept > 0 {
		return false, errorf(PeriodClosed, "player %q has scores only in closed periods, which are final", player)
	}
	return removed > 0, nil
}

// seasonLedgered is StartSeason (kind EventSeasonStart, arguments checked) or EndSeason with a ledger.
func (s *Store) seasonLedgered(ctx context.Context, board string, kind EventKind, id string, ends time.Time) (
	*SeasonChange, error) {
	if _, err := s.seasonBoard(ctx, board); err != nil {
		return nil, err
	}
	e := LedgerEvent{Kind: kind}
	if kind == EventSeasonStart {
		e.Args, _ = json.Marshal(seasonArgs{ID: id, EndsAt: ends.Unix()})
	}
	r, err := s.writeOne(ctx, board, e)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Clock()
	reply, _ := r.([]any)
	if len(reply) != 9 {
		si, err := s.LatestSeason(ctx, board) // applied before (by a catch-up)
		if err != nil || si == nil {
			return nil, err
		}
		return &SeasonChange{Season: *si}, nil
	}
	status := toString(reply[0])
	c := &SeasonChange{Changed: status == "started" || status == "ended", Season: seasonReply(reply[1:5], now)}
	if toString(reply[5]) != "" {
		closed := seasonReply(reply[5:9], now)
		c.Closed = &closed
	}
	return c, nil
}
