package leaderboard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// restore.go: the index rebuilt from the ledger. A board that Redis lost (a restart without persistence, a
// FLUSHALL, a failover to a replica that had not copied it) is restored from its events into keys nobody reads
// (the definition waits in rdef, see common.lua), and switched in at once by restore_done.lua; meanwhile its
// requests answer UNAVAILABLE. A board whose newest events are missing (its high-water mark is behind the
// ledger's head) gets them applied where it stands (catchUp).

// restoreBatch is how many events a restore reads from the ledger at a time.
const restoreBatch = 5000

// applyCallEvents is the most submissions a restore or catch-up applies in one script call. Redis runs nothing
// else meanwhile, so other boards' writes wait behind each call: the calls are kept short (BENCHMARKS.md, "The ledger").
const applyCallEvents = maxLedgerItems

// DefaultRestoreShare is Config.RestoreShare's default: a restore does not rest for a share of its time (its
// pace is Config.RestoreRate's); an operator who would rather keep the other boards' writes fast sets less.
const DefaultRestoreShare = 1.0

// DefaultRestoreRate is Config.RestoreRate's default, in events a second: a board of 1,000,000 events restores in
// 40 s, within the ledger issue's 45 s, and what a faster restore would take goes to the other boards' writes
// (BENCHMARKS.md, "The ledger": at full speed a restore kept the writers of other boards to 0.4 of their rate).
const DefaultRestoreRate = 25_000

// restoreLockTTL is how long a restorer holds a board before another process may take over (refreshed while it
// works).
const restoreLockTTL = 30 * time.Second

// boardKeyField is the field of a board's counters (every shard's) that keeps the ledger's key of the board its
// keys hold (create.lua sets it from LedgerEvent.Board). An id deleted and created again is another board of the
// ledger, whose events are numbered from 1 again: the high-water mark of a Redis that still holds the board of
// before the deletion (a failover to a replica that lagged behind both) says nothing of the new one, and the
// gate would take the new board's events as seen or apply them on the old one. The key tells them apart, and such
// a board is restored whole (otherBoard). Boards created before the key was kept have none: nothing to compare.
const boardKeyField = "lbk"

// boardArg is create.lua's ARGV[4]: the ledger's key of the board an EventCreate created ("" unknown).
func (e *LedgerEvent) boardArg() string {
	if e.Board == 0 {
		return ""
	}
	return strconv.FormatInt(e.Board, 10)
}

// otherBoard reports whether a board's boardKeyField (v; "" none) names another board of the ledger than key.
func otherBoard(v string, key int64) bool { return v != "" && v != strconv.FormatInt(key, 10) }

// RestoreReport is what OnRestore hears of a restore or catch-up.
type RestoreReport struct {
	Board    string
	Events   int           // events applied
	Took     time.Duration // from start to switch
	CatchUp  bool          // the board was there, only its newest events were missing
	Err      error
	Restored bool // the board is readable and whole again
	// Applying is the time spent in script calls applying events, Resting the time rested after them
	// (Config.RestoreShare and Config.RestoreRate); a catch-up does not rest.
	Applying, Resting time.Duration
	// Resent is how many close events whose delivery had not completed the restore put back into the board's
	// outbox, which Redis had lost with the board (resend.go); ResendErr is why it could not (the next ledger
	// check tries again).
	Resent    int
	ResendErr error

	due     time.Time // when the events applied so far are due at Config.RestoreRate
	refused []Refusal // submissions the restore refused that the ledger had not marked (applyEvents)
}

// restorer runs a store's restores: one per board in this process, and one per board among processes (a lock in
// Redis).
type restorer struct {
	mu      sync.Mutex
	running map[string]chan struct{}
}

func (r *restorer) init() { r.running = map[string]chan struct{}{} }

// start restores board in the background unless this process restores it already; it returns a channel closed
// when that restore ends.
func (r *restorer) start(q *sequencer, board string) <-chan struct{} {
	r.mu.Lock()
	if ch, ok := r.running[board]; ok {
		r.mu.Unlock()
		return ch
	}
	ch := make(chan struct{})
	r.running[board] = ch
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.running, board)
			r.mu.Unlock()
			close(ch)
		}()
		rep := q.restoreBoard(context.Background(), board, false)
		if f := q.s.cfg.OnRestore; f != nil && (rep.Events > 0 || rep.Err != nil || rep.Restored) {
			f(rep)
		}
	}()
	return ch
}

// Rebuild rebuilds a board from the ledger (rebuildLeaderboard): its keys are purged and its events applied again
// into fresh ones, then switched in; meanwhile the board answers UNAVAILABLE. It returns when the board is whole.
func (s *Store) Rebuild(ctx context.Context, board string) error {
	return s.rebuild(ctx, board, true)
}

// rebuild is Rebuild; without force it rebuilds the board only when Redis lacks it or a void marked it, and
// otherwise applies the events Redis lacks (restoreBoard).
func (s *Store) rebuild(ctx context.Context, board string, force bool) error {
	if s.seq == nil {
		return errorf(Invalid, "rebuildLeaderboard needs the ledger (DATABASE_URL)")
	}
	if err := checkID("board id", board); err != nil {
		return err
	}
	// The rebuild outlives the request: a caller that stops waiting (its deadline) leaves it running, and the
	// board answers UNAVAILABLE until it is done.
	done := make(chan RestoreReport, 1)
	go func() {
		rep := s.seq.restoreBoard(context.WithoutCancel(ctx), board, force)
		if f := s.cfg.OnRestore; f != nil {
			f(rep)
		}
		done <- rep
	}()
	select {
	case rep := <-done:
		return s.ledgerError(ctx, board, rep.Err) // a board from before the ledger has nothing to rebuild from
	case <-ctx.Done():
		return &Error{Code: Unavailable, Message: fmt.Sprintf("the rebuild of leaderboard %q goes on after this "+
			"request's deadline; the board answers UNAVAILABLE until it is done", board), Err: ctx.Err()}
	}
}

// holdBoard takes a board's restore lock (restoreBoard's) for a write that must not interleave with a restore: a
// deletion, which a restore that read the board's events before it would undo by switching the board back in. It
// answers errRestoring (nothing done) while a restore holds the board; release gives the lock back.
func (s *Store) holdBoard(ctx context.Context, board string) (release func(), err error) {
	lock, token := keyRestoring.of(s.makeKeyBase(board)), rand.Text()
	got, err := s.rdb.SetNX(ctx, lock, token, restoreLockTTL).Result()
	if err != nil {
		return nil, redisError(err)
	}
	if !got {
		return nil, errRestoring(board)
	}
	return func() {
		s.rdb.Eval(context.WithoutCancel(ctx), releaseLockLua, []string{lock}, token)
	}, nil
}

// releaseLockLua deletes a lock (KEYS[1]) if it still holds this holder's token (ARGV[1]).
const releaseLockLua = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end`

// restoreBoard restores board from the ledger when Redis lacks it (or always, with force), or applies the
// events Redis lacks when only the newest are missing.
func (q *sequencer) restoreBoard(ctx context.Context, board string, force bool) (rep RestoreReport) {
	s := q.s
	start := time.Now()
	rep.Board = board
	defer func() { rep.Took = time.Since(start) }()
	base := s.makeKeyBase(board)
	token := rand.Text()
	lock := keyRestoring.of(base)
	got, err := s.rdb.SetNX(ctx, lock, token, restoreLockTTL).Result()
	if err != nil {
		rep.Err = redisError(err)
		return rep
	}
	if !got {
		rep.Err = errRestoring(board) // another process restores it
		return rep
	}
	defer s.rdb.Eval(context.WithoutCancel(ctx), releaseLockLua, []string{lock}, token)
	keep := func() { s.rdb.Expire(ctx, lock, restoreLockTTL) }
	// The ledger's board is read under the lock, which a deletion takes too: read before it, it could be a board
	// deleted (and created again) since, which the restore would switch back in.
	lb, ok, err := q.ledger.Board(ctx, board)
	if err != nil {
		rep.Err = err
		return rep
	}
	if !ok {
		rep.Err = errorf(NotFound, "no leaderboard with id %q", board)
		return rep
	}

	// The board's definition, from its first event: how many shards hold it.
	first, err := q.ledger.Events(ctx, lb.Key, 0, 1)
	if err != nil {
		rep.Err = err
		return rep
	}
	if len(first) == 0 || first[0].Kind != EventCreate {
		rep.Err = fmt.Errorf("ledger: board %q has no create event", board)
		return rep
	}
	b, err := decodeBoard(string(first[0].Args))
	if err != nil {
		rep.Err = err
		return rep
	}
	bases := s.shardBases(board, b.Shards)
	// Every shard must hold the definition and every event for a catch-up; a shard that lost its keys (a failover
	// of its primary) has the whole board restored.
	st, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, base := range bases {
			p.Exists(ctx, keyDef.of(base))
			p.Exists(ctx, keyRestoreDef.of(base))
			p.HGet(ctx, keyCounters.of(base), "lsq")
			p.HGet(ctx, keyCounters.of(base), "void")
			p.HGet(ctx, keyCounters.of(base), boardKeyField)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		rep.Err = redisError(err)
		return rep
	}
	hasDef, hasRdef := true, true
	hwm := int64(-1)
	for k := range bases {
		hasDef = hasDef && st[5*k].(*redis.IntCmd).Val() == 1
		hasRdef = hasRdef && st[5*k+1].(*redis.IntCmd).Val() == 1
		if h, _ := st[5*k+2].(*redis.StringCmd).Int64(); hwm < 0 || h < hwm {
			hwm = h
		}
		if st[5*k+3].(*redis.StringCmd).Val() != "" {
			force = true // a void whose rebuild did not happen yet
		}
		if otherBoard(st[5*k+4].(*redis.StringCmd).Val(), lb.Key) {
			force = true // the keys hold the board of the id before a deletion: nothing of them is this board's
		}
	}
	if hasDef && !force {
		rep.CatchUp = true
		rep.Events, rep.Err = q.catchUp(ctx, board, hwm, lb.Head)
		return rep
	}
	// Events go into keys nobody reads: the board's definition waits in rdef until the switch. A restore that
	// another process left half done (rdef there, on every shard) goes on where it stopped; anything else the
	// board holds goes.
	if force || !hasRdef {
		s.forget(board)
		if err := s.clearBoard(ctx, board, bases, lock); err != nil {
			rep.Err = err
			return rep
		}
		hwm = 0
	}
	s.restoring.Store(board, s.newCachedBoard(board, b))
	defer s.restoring.Delete(board)
	head := lb.Head
	lastKeep := time.Now()
	var lateVoid int64
	for {
		pages, stop := q.readAhead(ctx, lb.Key, hwm, head)
		for pg := range pages {
			evs, err := pg.events, pg.err
			if err == nil {
				err = s.applyEvents(ctx, board, evs, &rep)
			}
			if err != nil {
				stop()
				rep.Err = err
				return rep
			}
			for _, e := range evs {
				if e.Kind == EventVoid && e.Seq > lb.Head {
					lateVoid = e.Seq // recorded after this restore read the events it voids: rebuild again
				}
			}
			rep.Events += len(evs)
			hwm = evs[len(evs)-1].Seq
			if time.Since(lastKeep) > restoreLockTTL/3 {
				keep()
				lastKeep = time.Now()
			}
		}
		stop()
		// Writes recorded meanwhile waited for the switch (their boards answered UNAVAILABLE): take them too.
		lb2, _, err := q.ledger.Board(ctx, board)
		if err != nil {
			rep.Err = err
			return rep
		}
		if lb2.Head > head {
			head = lb2.Head
			continue
		}
		if len(bases) > 1 {
			// Shards 1.. switch in first, and only once each holds every event: shard 0 is the board's door.
			if low, err := s.lowestMark(ctx, bases); err != nil || low < head {
				if err != nil {
					rep.Err = err
					return rep
				}
				hwm = low
				continue
			}
			for _, sb := range bases[1:] {
				if err := s.fns.run(ctx, restoreDoneScript, []string{sb, s.registryOf(slotTag(HashSlot(sb)))}, head,
					board, "", channelOf(sb), RestoredNotice, "shard").Err(); err != nil {
					rep.Err = redisError(err)
					return rep
				}
			}
		}
		r, err := s.fns.run(ctx, restoreDoneScript, []string{base, s.registryKey(board)}, head, board,
			s.publishArg(), channelOf(base), RestoredNotice).Result()
		if err != nil {
			rep.Err = redisError(err)
			return rep
		}
		if r == "done" {
			break
		}
		hwm, _ = r.(int64)
	}
	s.forget(board)
	if lateVoid > 0 {
		if err := s.rdb.HSet(ctx, keyCounters.of(base), "void", lateVoid).Err(); err != nil {
			rep.Err = redisError(err)
			return rep
		}
	}
	rep.Restored = true
	if len(rep.refused) > 0 {
		// Submissions that counted until a void took away what let them (a SUM total now out of range): the ledger
		// marks them as it marks a live refusal, so that scoreEvents says they do not count. A failed mark leaves
		// them to the next replay, which refuses them again.
		_ = q.ledger.Refuse(ctx, board, s.cfg.Clock(), rep.refused)
	}
	rep.Resent, rep.ResendErr = s.ResendUndelivered(ctx, lb.Key)
	return rep
}

// eventPage is a page of a board's events read from the ledger, or the error that ended the reading.
type eventPage struct {
	events []LedgerEvent
	err    error
}

// readAhead reads a board's events after seq after up to seq head, a page (restoreBatch) at a time, one page
// ahead of the caller: PostgreSQL reads the next page while Redis applies this one. stop ends the reading early;
// the channel is closed after the last page or an error.
func (q *sequencer) readAhead(ctx context.Context, key, after, head int64) (pages <-chan eventPage, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan eventPage, 1)
	go func() {
		defer close(ch)
		for after < head {
			evs, err := q.ledger.Events(ctx, key, after, restoreBatch)
			if len(evs) == 0 && err == nil {
				return
			}
			select {
			case ch <- eventPage{evs, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			after = evs[len(evs)-1].Seq
		}
	}()
	return ch, func() {
		cancel()
		for range ch { // let the reader end
		}
	}
}

// RestoredNotice is what restore_done.lua publishes on a restored board's channel: like DeletedNotice it is not
// an Event, so every listener reads the board again.
const RestoredNotice = "restored"

// lowestMark is the lowest high-water mark of the shards whose key bases are bases.
func (s *Store) lowestMark(ctx context.Context, bases []string) (int64, error) {
	pipe := s.rdb.Pipeline()
	marks := make([]*redis.StringCmd, len(bases))
	for k, base := range bases {
		marks[k] = pipe.HGet(ctx, keyCounters.of(base), "lsq")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, redisError(err)
	}
	low := int64(-1)
	for _, m := range marks {
		if h, _ := m.Int64(); low < 0 || h < low {
			low = h
		}
	}
	return low, nil
}
