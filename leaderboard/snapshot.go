package leaderboard

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed snapshot.lua
	snapshotLua string
	//go:embed snappage.lua
	snapPageLua string
	//go:embed snapkeys.lua
	snapKeysLua string

	snapshotScript = newScript("snapshot", snapshotLua, false)
	snapPageScript = newScript("snappage", snapPageLua, true)
	snapKeysScript = newScript("snapkeys", snapKeysLua, false)
)

// DefaultSnapshotTTL is Config.SnapshotTTL's default.
const DefaultSnapshotTTL = time.Minute

// Snapshot is a copy of a window period's standings at one moment, in keys of its own on the board's slot
// (snapshot.lua): what an export pages through, so that a board that moves while a client reads the file still
// gives every player once, each row's name, score and updatedAt from the same moment as its rank. It lists what
// Top lists (on exactTop boards, the exact tier). The copy costs Redis memory and time in proportion to the
// period (about the memory of its keys, and seconds of Redis time for a million players): hold few at once, and
// Close each one.
//
// Its keys expire SnapshotTTL after the last renewal; a goroutine renews them every third of that until Close,
// so a process that dies mid-export leaves nothing behind for longer.
type Snapshot struct {
	Resolved
	Rows int64 // players in the exact ranking: the rows Page lists
	Size int64 // players in the window period: topPercent is 100 * rank / Size

	s    *Store
	keys []string // the board's key base (the scripts' KEYS)
	// frozen: a closed period Redis no longer holds, paged from its frozen standings (no copy).
	frozen *frozenView
	// merge: a sharded board's snapshot, one part per shard, paged by merging them (shardsnap.go).
	merge *snapshotMerge
	cut   tailCut // where its tail may begin, when its exact tier has a gap (a shard's: tailCut)
	id    string
	once  sync.Once
	stop  chan struct{} // closed by Close: the renewals end
	done  chan struct{} // closed when they have
}

// Snapshot copies the standings of v as they are now (see Snapshot). The copy is one script that holds Redis for
// a time in proportion to the period's size (seconds for a million players); ctx, and the client's socket
// timeout, must allow for that.
func (s *Store) Snapshot(ctx context.Context, v View) (*Snapshot, error) {
	if s.seq != nil && v.Window != "" && v.Period != "" {
		// A snapshot is of now: of a period Redis no longer holds, the newest frozen version the ledger has,
		// not one this store looked up within frozenTTL (a correction written since by another store of the
		// process, such as the API's for an export's, or by another process, is in it).
		s.forgetFrozen(v.Board, v.Window, v.Period)
	}
	if f, err := s.frozen(ctx, &v); err != nil || f != nil {
		if err != nil {
			return nil, err
		}
		sn := &Snapshot{Resolved: f.r, Rows: f.fp.Rows, Size: f.fp.Size, s: s, frozen: f}
		sn.once.Do(func() {}) // nothing to renew
		return sn, nil
	}
	var snap *Snapshot
	err := s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		if r.Board.Sharded() {
			snap, err = s.snapshotSharded(ctx, r, s.shardBases(r.Board.ID, r.Board.Shards))
			return err
		}
		snap, err = s.snapshotOf(ctx, r, s.keyBase(r.Board.ID))
		return err
	})
	if err == nil && snap.merge != nil {
		return snap, nil // each part renews itself
	}
	if err != nil {
		return nil, err
	}
	snap.stop, snap.done = make(chan struct{}), make(chan struct{})
	go snap.renew()
	return snap, nil
}

// snapshotOf copies a resolved window period of the board whose keys start at base (see Snapshot); the caller
// starts its renewals.
func (s *Store) snapshotOf(ctx context.Context, r Resolved, base string) (*Snapshot, error) {
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	sn := &Snapshot{Resolved: r, s: s, keys: []string{base}, id: rand.Text()}
	reply, err := s.fns.run(ctx, snapshotScript, sn.keys, r.Board.sum, windowCodes[r.Window], r.Period, sn.id,
		s.snapshotTTL().Milliseconds()).Slice()
	if err == nil && len(reply) != 3 {
		err = fmt.Errorf("snapshot script returned %d values", len(reply))
	}
	if err != nil {
		err = redisError(err)
		if code := ErrorCode(err); (code == Unavailable || code == Internal) && !errors.Is(err, errStaleDef) {
			// Not a refusal of the script's: the copy may have been made (or still be running: Redis runs
			// this after it). Deleting a copy that was never made changes nothing.
			dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = sn.drop(dropCtx)
			cancel()
		}
		return nil, err
	}
	sn.Rows, sn.Size = toInt(reply[0]), toInt(reply[1])
	if sn.cut, err = r.Board.gapCut(sn.Rows, toString(reply[2])); err != nil {
		_ = sn.drop(context.WithoutCancel(ctx))
		return nil, redisError(err)
	}
	return sn, nil
}

// snapshotTTL is Config.SnapshotTTL or its default.
func (s *Store) snapshotTTL() time.Duration {
	if s.cfg.SnapshotTTL > 0 {
		return s.cfg.SnapshotTTL
	}
	return DefaultSnapshotTTL
}

// renew renews the snapshot's TTL every third of it until Close.
func (sn *Snapshot) renew() {
	defer close(sn.done)
	ttl := sn.s.snapshotTTL()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-sn.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		// A failed renewal is tried again at the next tick; a snapshot that expired fails its next Page.
		_ = sn.s.fns.run(ctx, snapKeysScript, sn.keys, sn.id, ttl.Milliseconds()).Err()
		cancel()
	}
}

// Page returns ranks offset+1 .. offset+n (n at most MaxFirst) of the snapshot, as Top would have at its moment.
// A snapshot that is gone (its board deleted, or its keys expired) is NotFound.
func (sn *Snapshot) Page(ctx context.Context, offset, n int) (*Page, error) {
	if n < 0 || n > MaxFirst || offset < 0 {
		return nil, errorf(Invalid, "offset must be at least 0 and n between 0 and %d", MaxFirst)
	}
	if sn.frozen != nil {
		return sn.s.frozenTop(ctx, sn.frozen, offset, n)
	}
	if sn.merge != nil {
		return sn.pageMerged(ctx, offset, n)
	}
	release, err := sn.s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return sn.s.page(sn.Resolved, sn.s.fns.run(ctx, snapPageScript, sn.keys, sn.id, offset, n))
}

// Close ends the renewals and deletes the snapshot's keys. Call it once the export is over, however it ended,
// with a context that outlives the request's.
func (sn *Snapshot) Close(ctx context.Context) error {
	if sn.merge != nil {
		var err error
		for _, p := range sn.merge.parts {
			err = errors.Join(err, p.Close(ctx))
		}
		return err
	}
	sn.once.Do(func() {
		close(sn.stop)
		<-sn.done
	})
	return sn.drop(ctx)
}

// drop deletes the snapshot's keys.
func (sn *Snapshot) drop(ctx context.Context) error {
	if sn.frozen != nil {
		return nil
	}
	err := sn.s.fns.run(ctx, snapKeysScript, sn.keys, sn.id, 0).Err()
	if err == redis.Nil {
		err = nil
	}
	return redisError(err)
}
