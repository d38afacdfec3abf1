package leaderboard

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed delete.lua
	deleteLua string
	//go:embed purge.lua
	purgeLua string
	//go:embed watch.lua
	watchLua string

	deleteScript = newScript("delete", deleteLua, false)
	purgeScript  = newScript("purge", purgeLua, false)
	watchScript  = newScript("watch", watchLua, false)
)

// DeletedNotice is the payload DeleteBoard publishes on a board's channel. It is not an Event (DecodeEvent
// refuses it), so a listener that gets it re-reads the board, as after a lost event, and finds it NOT_FOUND.
const DeletedNotice = "deleted"

// PurgeBatch is how many keys one step of a deletion's purge lists (SCAN COUNT) and deletes (one purge script).
const PurgeBatch = 1000

// DeleteBoard deletes a board and every key it has: all windows and periods (current and retained), player
// records, names, histograms, eventId dedupe records, counters. It reports whether a board with the id existed.
//
// The visible part is one script: the definition and the board-list entry go, a tombstone stays, and the deletion
// is announced on the board's channel. From then on every read and write of the board is NOT_FOUND, since every
// script checks the definition first. The rest of the keys are then deleted in batches of PurgeBatch (SCAN of the
// board's key pattern on the node of its slot, one short script per batch), so that a board with millions of
// players never blocks Redis for long; DeleteBoard returns when all of them are gone. If it is interrupted, the
// tombstone stays, and the next DeleteBoard or CreateBoard of the id finishes the purge (finishDeletion).
func (s *Store) DeleteBoard(ctx context.Context, id string) (bool, error) {
	if err := checkID("board id", id); err != nil {
		return false, err
	}
	if s.seq != nil {
		// No restore runs while the deletion is recorded and carried out: one that had read the board's events
		// would switch the deleted board back in. While one runs, the deletion is refused before the ledger.
		release, err := s.holdBoard(ctx, id)
		if err != nil {
			return false, err
		}
		defer release()
		if _, err := s.writeOne(ctx, id, LedgerEvent{Kind: EventDelete}); err != nil {
			if ErrorCode(err) != NotFound {
				return false, err
			}
		}
	}
	token := rand.Text()
	if b, err := s.BoardNow(ctx, id); err == nil && b.Sharded() {
		token = deletionToken(token, b.Shards) // shards 1.. go after shard 0 (finishDeletion)
	}
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return false, err
	}
	reply, err := s.fns.run(ctx, deleteScript, []string{s.keyBase(id), s.registryKey(id)}, id, token,
		s.publishArg(), s.Channel(id), DeletedNotice).Result()
	release()
	if err != nil {
		return false, redisError(err)
	}
	s.forget(id)
	parts, _ := reply.([]any)
	if len(parts) != 2 {
		return false, nil // "none": no such board, nothing to purge
	}
	state, _ := parts[0].(string)
	token, _ = parts[1].(string) // an earlier deletion's when it is still being purged
	// The board is gone for everybody now; a caller that stops waiting must not leave the purge half done.
	if err := s.finishDeletion(context.WithoutCancel(ctx), id, token); err != nil {
		return false, err
	}
	return state == "deleted", nil
}

// deletionToken is the tombstone token of the deletion of a board of shards shards: token, '.' (never in
// rand.Text) and the shard count, so that whoever finishes the deletion knows which shards it has to clear.
func deletionToken(token string, shards int) string { return token + "." + strconv.Itoa(shards) }

// finishDeletion deletes what is left of a deleted board whose shard 0 holds the tombstone token: first shards 1..
// of the layout the token names (deletionToken; none for a board of one shard), then shard 0's keys and, last,
// its tombstone. While the tombstone stays, a deletion interrupted anywhere (a node that cannot be reached, a
// process that stops) is finished by the next DeleteBoard or CreateBoard of the id, whatever shard count the board
// created next has: only the tombstone knows the old board's shards.
func (s *Store) finishDeletion(ctx context.Context, id, token string) error {
	if _, n, ok := strings.Cut(token, "."); ok {
		if shards, err := strconv.Atoi(n); err == nil && shards > 1 && shards <= MaxShards {
			if err := s.deleteShards(ctx, &Board{ID: id, Shards: shards}); err != nil {
				return err
			}
		}
	}
	return s.purge(ctx, id, token)
}

// Forget drops a board's definition from this store's cache (and the board from its list), so that the next use
// reads it from Redis: a live hub calls it when the board's deletion notice arrives, since the id may have been
// created again meanwhile, with another definition (another shard count, order, ...).
func (s *Store) Forget(id string) { s.forget(id) }

// forget drops a board from this store's definition cache and board list.
func (s *Store) forget(id string) {
	s.forgetMu.Lock()
	s.forgets++
	s.boards.Delete(id)
	s.forgetMu.Unlock()
	s.listChange(id, false)
}

// purge deletes the remaining keys of a deleted board while its tombstone holds token, then the tombstone. It
// scans the board's key pattern on the node that holds its slot, PurgeBatch keys per step, until a whole pass finds
// nothing left (nothing can write to the board meanwhile: there is no definition). Another purge of the same
// deletion may run at once; whichever ends first removes the tombstone and the other stops at its next batch.
func (s *Store) purge(ctx context.Context, id, token string) error {
	return s.purgeBase(ctx, s.keyBase(id), token)
}

// purgeBase is purge of the keys under one key base: a board's, or a shard's of a sharded board (shard.go).
func (s *Store) purgeBase(ctx context.Context, base, token string) error {
	pattern := globEscape(base) + "*"
	for {
		node, err := s.slotNode(ctx, base)
		if err != nil {
			return redisError(err)
		}
		var deleted int64
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, PurgeBatch).Result()
			if err != nil {
				return redisError(err)
			}
			if len(keys) > 0 {
				n, err := s.purgeStep(ctx, base, keys, token, "")
				if err != nil || n < 0 {
					return err // n < 0: another purge finished this deletion
				}
				deleted += n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		if deleted == 0 {
			_, err := s.purgeStep(ctx, base, nil, token, "done")
			return err
		}
	}
}

// purgeStep runs one purge script. It does not wait for the store's write gate (MaxWrites): the board is deleted
// already, each step is short, and a full gate must not leave a deletion half purged with an error for a caller
// whose board is gone.
func (s *Store) purgeStep(ctx context.Context, base string, keys []string, token, final string) (int64, error) {
	n, err := s.fns.run(ctx, purgeScript, append([]string{base}, keys...), token, final).Int64()
	return n, redisError(err)
}

// slotNode returns the client that SCANs the keys of key's hash slot: the master of the slot on a cluster, the
// store's client otherwise.
func (s *Store) slotNode(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return s.rdb, nil
}

// deletingToken returns the token of an unfinished deletion when err is create.lua's refusal of an id whose
// deletion is still being purged.
func deletingToken(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	i := strings.Index(msg, "LB_DELETING ")
	if i < 0 {
		return "", false
	}
	token, _, _ := strings.Cut(msg[i+len("LB_DELETING "):], " ")
	return token, token != ""
}

// createFinishingPurge runs the create script; when a deletion of the id is still being purged, it finishes that
// purge and tries once more.
// keys: the key base (the board's, or a shard's) and the board list of its slot; as: empty, or "shard" (create.lua).
func (s *Store) createFinishingPurge(ctx context.Context, keys []string, def, id, as string) error {
	err := s.runCreate(ctx, keys, def, id, as)
	if token, ok := deletingToken(err); ok {
		finish := func() error { return s.purgeBase(ctx, keys[0], token) } // a shard's own deletion
		if as == "" {
			finish = func() error { return s.finishDeletion(ctx, id, token) } // the board's, with its shards
		}
		if err := finish(); err != nil {
			return err
		}
		err = s.runCreate(ctx, keys, def, id, as)
	}
	return createError(err)
}

// runCreate runs the create script once (createFinishingPurge's arguments).
func (s *Store) runCreate(ctx context.Context, keys []string, def, id, as string) error {
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return s.fns.run(ctx, createScript, keys, def, id, as).Err()
}

// createError is the error of a creation from the create script's.
func createError(err error) error {
	if ErrorCode(err) == RateLimited {
		return err
	}
	if _, ok := deletingToken(err); ok {
		return &Error{Code: Conflict, Message: "the leaderboard is being deleted; try again",
			Err: errors.New(err.Error())}
	}
	return redisError(err)
}

// Exists reports whether a board exists now, asking Redis (not the definition cache).
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	n, err := s.rdb.Exists(ctx, keyDef.of(s.keyBase(id))).Result()
	return n == 1, redisError(err)
}

// Gone reports whether a board no longer exists: Redis lacks it and, with the ledger, the ledger holds no live
// board of that id. A board Redis lost and the ledger holds is being restored (this starts it), not gone: live
// subscriptions of it go on.
func (s *Store) Gone(ctx context.Context, id string) (bool, error) {
	ok, err := s.Exists(ctx, id)
	if err != nil || ok {
		return false, err
	}
	err = s.missing(ctx, id)
	switch ErrorCode(err) {
	case NotFound:
		return true, nil
	case Unavailable:
		return false, nil
	}
	return false, err
}

// BoardMark tells one board of an id from another created after its deletion: its definition (what
// Board.Definition returns) and its creation mark (born of keyCounters; empty for a board restored from the
// ledger, or created before the mark existed).
type BoardMark struct{ Def, Born string }

// RecreatedSince reports whether the board read as m was deleted and created again since it read as then: another
// definition, or a mark changed to a non-empty one (a restore keeps the board and leaves no mark; a creation
// always leaves one).
func (m BoardMark) RecreatedSince(then BoardMark) bool {
	return m.Def != then.Def || m.Born != "" && m.Born != then.Born
}

// BoardMarkNow reads a board's mark from Redis, not from the store's cache. A board Redis lacks is NotFound, or
// Unavailable while the ledger restores it (as for Board).
func (s *Store) BoardMarkNow(ctx context.Context, id string) (BoardMark, error) {
	if err := checkID("board id", id); err != nil {
		return BoardMark{}, err
	}
	var mark func() (BoardMark, error)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		mark = s.queueMark(ctx, p, id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return BoardMark{}, redisError(err)
	}
	return mark()
}

// queueMark queues the reads of a board's mark on p (keys of the board's key base: one slot) and returns what
// reads them once p ran.
func (s *Store) queueMark(ctx context.Context, p redis.Pipeliner, id string) func() (BoardMark, error) {
	base := s.makeKeyBase(id)
	def := p.Get(ctx, keyDef.of(base))
	born := p.HGet(ctx, keyCounters.of(base), "born")
	return func() (BoardMark, error) {
		switch err := def.Err(); {
		case errors.Is(err, redis.Nil):
			return BoardMark{}, s.missing(ctx, id)
		case err != nil:
			return BoardMark{}, redisError(err)
		}
		return BoardMark{Def: defSum(def.Val()), Born: born.Val()}, nil
	}
}

// BoardNow is Board checked against Redis: a cached definition of a board that was deleted (by another process)
// is forgotten and the board is NotFound; one of a board deleted and created again since, with another definition,
// is read again. One GET per call.
func (s *Store) BoardNow(ctx context.Context, id string) (*Board, error) {
	c, err := s.loadBoard(ctx, id)
	if err != nil {
		return nil, err
	}
	def, err := s.rdb.Get(ctx, keyDef.of(c.keys)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		s.forget(id)
		return nil, s.missing(ctx, id) // with the ledger, a board Redis lost answers UNAVAILABLE while it is restored
	case err != nil:
		return nil, redisError(err)
	case defSum(def) == c.b.sum:
		return c.b, nil
	}
	s.boards.CompareAndDelete(id, c)
	return s.Board(ctx, id)
}
