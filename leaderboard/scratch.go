package leaderboard

import (
	"context"
	"crypto/rand"
	"fmt"
)

// scratch.go: the standings a closed period would have from the events that count now, for a period whose keys
// have expired (a void's correction of frozen standings, freeze.go). The board's events are applied again, voids
// included, into the keys of a scratch board that nobody lists, each key living by its event's own clock; the
// periods are read from there and the scratch keys deleted.

// scratchID is the id of a scratch replay of board: the board's id, NUL, "scratch", NUL and 12 random characters
// (a client would have to guess them to name it).
func scratchID(board string) string { return board + "\x00scratch\x00" + rand.Text()[:12] }

// periodStandings is a period's size and rows (ranks 1..n).
type periodStandings struct {
	size int64
	rows []Entry
}

// scratchStandings replays the board (ledger key key, definition def) into scratch keys and returns the
// standings of the periods asked for.
func (s *Store) scratchStandings(ctx context.Context, board string, key int64, def *Board, periods []FrozenPeriod) (
	[]periodStandings, error) {
	id := scratchID(board)
	v := s.newCachedBoard(id, def)
	v.scratch = true
	bases := s.shardBases(id, def.Shards)
	s.restoring.Store(id, v)
	defer func() {
		s.restoring.Delete(id)
		s.forget(id)
		_ = s.clearBoard(context.WithoutCancel(ctx), id, bases, "")
	}()
	var after int64
	var rep RestoreReport // the scratch replay rests as a restore does
	for {
		evs, err := s.seq.ledger.Events(ctx, key, after, restoreBatch)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		if err := s.applyEvents(ctx, id, evs, &rep); err != nil {
			return nil, err
		}
		after = evs[len(evs)-1].Seq
	}
	// The snapshot script checks the definition where a readable board keeps it, as restore_done.lua moves it.
	for _, base := range bases {
		if err := s.rdb.Rename(ctx, keyRestoreDef.of(base), keyDef.of(base)).Err(); err != nil {
			return nil, redisError(fmt.Errorf("scratch replay of %q: %w", board, err))
		}
	}
	// Read by the scratch's keys: its definition names the board itself, and a read by id would find the board.
	out := make([]periodStandings, len(periods))
	for i, fp := range periods {
		r := Resolved{Board: def, Window: fp.Window, Period: fp.Period}
		var sn *Snapshot
		var err error
		if def.Sharded() {
			sn, err = s.snapshotSharded(ctx, r, bases)
		} else {
			sn, err = s.snapshotOf(ctx, r, bases[0])
		}
		if err != nil {
			return nil, err
		}
		size, rows, err := sn.all(ctx)
		if sn.merge != nil {
			_ = sn.Close(context.WithoutCancel(ctx)) // its parts renew themselves until then
		} else {
			_ = sn.drop(context.WithoutCancel(ctx))
		}
		if err != nil {
			return nil, err
		}
		out[i] = periodStandings{size: size, rows: rows}
	}
	return out, nil
}
