package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Board returns the live board with this id as the ledger holds it; ok is false when it holds none.
func (l *Ledger) Board(ctx context.Context, id string) (b leaderboard.LedgerBoard, ok bool, err error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	err = l.pool.QueryRow(ctx, `SELECT board_key, head FROM boards WHERE id = $1 AND deleted_at IS NULL`, []byte(id)).
		Scan(&b.Key, &b.Head)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, false, nil
	}
	if err != nil {
		return b, false, unavailable(err)
	}
	b.ID = id
	return b, true, nil
}

// Boards returns every live board the ledger holds.
func (l *Ledger) Boards(ctx context.Context) ([]leaderboard.LedgerBoard, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT id, board_key, head FROM boards WHERE deleted_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaderboard.LedgerBoard, error) {
		var b leaderboard.LedgerBoard
		var id []byte
		err := r.Scan(&id, &b.Key, &b.Head)
		b.ID = string(id)
		return b, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

const eventColumns = `seq, kind, coalesce(player, ''), coalesce(score, 0), coalesce(event_id, refused_event_id, ''),
	coalesce(fingerprint, ''), coalesce(achieved_ms, 0), recorded_ms, name, meta, args, voided_ms IS NOT NULL,
	coalesce(void_reason, '')`

func scanEvent(r pgx.CollectableRow) (leaderboard.LedgerEvent, error) {
	var e leaderboard.LedgerEvent
	var kind int16
	var achieved, recorded int64
	var player, eventID, name []byte
	var args *string
	if err := r.Scan(&e.Seq, &kind, &player, &e.Score, &eventID, &e.Fingerprint, &achieved, &recorded,
		&name, &e.Meta, &args, &e.Voided, &e.VoidReason); err != nil {
		return e, err
	}
	e.Player, e.EventID = string(player), string(eventID)
	if name != nil {
		n := string(name)
		e.Name = &n
	}
	e.Kind = leaderboard.EventKind(kind)
	if achieved != 0 {
		e.AchievedAt = time.UnixMilli(achieved).UTC()
	}
	e.RecordedAt = time.UnixMilli(recorded).UTC()
	if args != nil {
		e.Args = []byte(*args)
	}
	return e, nil
}

// Events returns up to limit events of the board with ledger key key after seq after, in order.
func (l *Ledger) Events(ctx context.Context, key, after int64, limit int) ([]leaderboard.LedgerEvent, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT `+eventColumns+` FROM events
		WHERE board_key = $1 AND seq > $2 ORDER BY seq LIMIT $3`, key, after, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, unavailable(err)
	}
	for i := range out {
		out[i].Board = key
	}
	return out, nil
}

// PlayerEvents returns up to limit submissions of a player on the board with ledger key key after seq after,
// oldest first.
func (l *Ledger) PlayerEvents(ctx context.Context, key int64, player string, after int64, limit int) (
	[]leaderboard.LedgerEvent, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT `+eventColumns+` FROM events
		WHERE board_key = $1 AND player = $2 AND kind = $3 AND seq > $4 ORDER BY seq LIMIT $5`,
		key, []byte(player), int16(leaderboard.EventSubmit), after, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}
