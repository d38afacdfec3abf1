package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// frozen.go: closed periods' final standings (tables closes and standings), versioned: a correction after a void
// adds a version, and readers take the newest.

const closeColumns = `version, reason, ended_ms, frozen_ms, size, rows, coalesce(outbox_id, '')`

func scanClose(r pgx.Row, fp *leaderboard.FrozenPeriod) error {
	var ended, frozen int64
	if err := r.Scan(&fp.Version, &fp.Reason, &ended, &frozen, &fp.Size, &fp.Rows, &fp.OutboxID); err != nil {
		return err
	}
	fp.EndedAt, fp.FrozenAt = time.UnixMilli(ended).UTC(), time.UnixMilli(frozen).UTC()
	return nil
}

// Freeze writes a version of a closed period's standings with its rows (ranks 1..n, in order), in one
// transaction; created is false when that version exists already (another process froze it: nothing changes).
func (l *Ledger) Freeze(ctx context.Context, key int64, fp leaderboard.FrozenPeriod, rows []leaderboard.Entry) (
	created bool, err error) {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return false, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit: a no-op
	tag, err := tx.Exec(ctx, `INSERT INTO closes (board_key, win, period, version, reason, ended_ms, frozen_ms, size, rows)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`, key, string(fp.Window), fp.Period,
		fp.Version, fp.Reason, fp.EndedAt.UnixMilli(), fp.FrozenAt.UnixMilli(), fp.Size, int64(len(rows)))
	if err != nil {
		return false, unavailable(err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	w := string(fp.Window)
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"standings"}, []string{"board_key", "win", "period", "version", "rank",
		"tie_rank", "player", "score", "name", "meta", "updated_ms"}, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		e := &rows[i]
		var name []byte
		if e.DisplayName != nil {
			name = []byte(*e.DisplayName)
		}
		var meta *string
		if e.Metadata != nil {
			m := string(e.Metadata)
			meta = &m
		}
		return []any{key, w, fp.Period, fp.Version, e.Rank, e.TieRank, []byte(e.PlayerID), e.Score, name, meta,
			e.UpdatedAt.UnixMilli()}, nil
	}))
	if err != nil {
		return false, unavailable(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, unavailable(err)
	}
	return true, nil
}

// Frozen returns the newest version of a period's frozen standings; ok is false when it has none.
func (l *Ledger) Frozen(ctx context.Context, key int64, w leaderboard.Window, period string) (
	fp leaderboard.FrozenPeriod, ok bool, err error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	err = scanClose(l.pool.QueryRow(ctx, `SELECT `+closeColumns+` FROM closes
		WHERE board_key = $1 AND win = $2 AND period = $3 ORDER BY version DESC LIMIT 1`, key, string(w), period), &fp)
	if errors.Is(err, pgx.ErrNoRows) {
		return fp, false, nil
	}
	if err != nil {
		return fp, false, unavailable(err)
	}
	fp.Window, fp.Period = w, period
	return fp, true, nil
}

// FrozenPeriods returns the newest version of every frozen period of a window of the board, by end, the latest
// first.
func (l *Ledger) FrozenPeriods(ctx context.Context, key int64, w leaderboard.Window) ([]leaderboard.FrozenPeriod, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT period, `+closeColumns+` FROM (
		SELECT DISTINCT ON (period) * FROM closes WHERE board_key = $1 AND win = $2 ORDER BY period, version DESC) newest
		ORDER BY ended_ms DESC, period DESC`, key, string(w))
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaderboard.FrozenPeriod, error) {
		fp := leaderboard.FrozenPeriod{Window: w}
		var ended, frozen int64
		err := r.Scan(&fp.Period, &fp.Version, &fp.Reason, &ended, &frozen, &fp.Size, &fp.Rows, &fp.OutboxID)
		fp.EndedAt, fp.FrozenAt = time.UnixMilli(ended).UTC(), time.UnixMilli(frozen).UTC()
		return fp, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// Announced records the outbox id of the close event that announced a version.
func (l *Ledger) Announced(ctx context.Context, key int64, w leaderboard.Window, period string, version int,
	outboxID string) error {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	_, err := l.pool.Exec(ctx, `UPDATE closes SET outbox_id = $5
		WHERE board_key = $1 AND win = $2 AND period = $3 AND version = $4`, key, string(w), period, version, outboxID)
	if err != nil {
		return unavailable(err)
	}
	return nil
}

const standingColumns = `rank, tie_rank, player, score, name, meta, updated_ms`

func scanStanding(r pgx.CollectableRow) (leaderboard.Entry, error) {
	var e leaderboard.Entry
	var player, name []byte
	var meta *string
	var updated int64
	if err := r.Scan(&e.Rank, &e.TieRank, &player, &e.Score, &name, &meta, &updated); err != nil {
		return e, err
	}
	e.PlayerID = string(player)
	if name != nil {
		n := string(name)
		e.DisplayName = &n
	}
	if meta != nil {
		e.Metadata = json.RawMessage(*meta)
	}
	e.UpdatedAt = time.UnixMilli(updated).UTC()
	return e, nil
}

// FrozenRows returns up to limit rows of a version's standings after rank after, in rank order.
func (l *Ledger) FrozenRows(ctx context.Context, key int64, w leaderboard.Window, period string, version int,
	after int64, limit int) ([]leaderboard.Entry, error) {
	return l.standings(ctx, `WHERE board_key = $1 AND win = $2 AND period = $3 AND version = $4 AND rank > $5
		ORDER BY rank LIMIT $6`, key, string(w), period, version, after, limit)
}

// standings reads the standings rows a WHERE clause (and its order and limit) selects.
func (l *Ledger) standings(ctx context.Context, where string, args ...any) ([]leaderboard.Entry, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT `+standingColumns+` FROM standings `+where, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, scanStanding)
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// FrozenPlayers returns the rows of the players that have one in a version's standings, in rank order.
func (l *Ledger) FrozenPlayers(ctx context.Context, key int64, w leaderboard.Window, period string, version int,
	players []string) ([]leaderboard.Entry, error) {
	ids := make([][]byte, len(players))
	for i, p := range players {
		ids[i] = []byte(p)
	}
	return l.standings(ctx, `WHERE board_key = $1 AND win = $2 AND period = $3 AND version = $4 AND player = ANY($5)
		ORDER BY rank`, key, string(w), period, version, ids)
}
