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

// Freeze writes a version of a closed period's standings with its rows (ranks 1..n, in order) and a delivery not
// completed yet for each webhook consumer group of groups, in one transaction; created is false when that version
// exists already (another process froze it: nothing changes).
func (l *Ledger) Freeze(ctx context.Context, key int64, fp leaderboard.FrozenPeriod, rows []leaderboard.Entry,
	groups []string) (created bool, err error) {
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
	if len(groups) > 0 {
		_, err = tx.Exec(ctx, `INSERT INTO close_deliveries (board_key, win, period, version, grp)
			SELECT $1, $2, $3, $4, g FROM unnest($5::text[]) g ON CONFLICT DO NOTHING`, key, w, fp.Period, fp.Version, groups)
		if err != nil {
			return false, unavailable(err)
		}
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

// Announced records the outbox id of the close event that announced a version, and when it was recorded (zero:
// unknown).
func (l *Ledger) Announced(ctx context.Context, key int64, w leaderboard.Window, period string, version int,
	outboxID string, at time.Time) error {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	var ms *int64
	if !at.IsZero() {
		m := at.UnixMilli()
		ms = &m
	}
	_, err := l.pool.Exec(ctx, `UPDATE closes SET outbox_id = $5, announced_ms = $6
		WHERE board_key = $1 AND win = $2 AND period = $3 AND version = $4`, key, string(w), period, version, outboxID, ms)
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

// Undelivered returns up to limit versions of frozen standings that were announced (they have an outbox id) and
// whose delivery to one of groups has not completed, of the live board with ledger key key (0: of every live
// board whose key is above after), by board key and, within a board, oldest announcement first. It reads the
// deliveries not completed (an index of them), never a board's whole history.
func (l *Ledger) Undelivered(ctx context.Context, key, after int64, groups []string, limit int) ([]leaderboard.Undelivered, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT b.id, c.board_key, c.win, c.period, `+closeColumns+`,
			coalesce(c.announced_ms, 0)
		FROM closes c JOIN boards b ON b.board_key = c.board_key AND b.deleted_at IS NULL
		WHERE c.outbox_id IS NOT NULL AND (c.board_key, c.win, c.period, c.version) IN (
			SELECT board_key, win, period, version FROM close_deliveries
			WHERE outcome IS NULL AND grp = ANY($2) AND (board_key = $1 OR $1 = 0 AND board_key > $4))
		ORDER BY c.board_key, coalesce(c.announced_ms, 0), c.outbox_id LIMIT $3`, key, groups, limit, after)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaderboard.Undelivered, error) {
		var u leaderboard.Undelivered
		var id []byte
		var win string
		var ended, frozen, announced int64
		err := r.Scan(&id, &u.Key, &win, &u.Period, &u.Version, &u.Reason, &ended, &frozen, &u.Size, &u.Rows,
			&u.OutboxID, &announced)
		u.Board, u.Window = string(id), leaderboard.Window(win)
		u.EndedAt, u.FrozenAt = time.UnixMilli(ended).UTC(), time.UnixMilli(frozen).UTC()
		if announced != 0 {
			u.AnnouncedAt = time.UnixMilli(announced).UTC()
		}
		return u, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// Delivered records that the delivery of a version of the live board's frozen standings to a webhook consumer
// group completed: delivered (a 2xx answer) or, with gaveUp, given up (dead-lettered). A delivery completes once:
// the first outcome stays. It records it also for a group that was not configured when the version was frozen.
func (l *Ledger) Delivered(ctx context.Context, board string, w leaderboard.Window, period string, version int,
	group string, gaveUp bool, at time.Time) error {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	outcome := "delivered"
	if gaveUp {
		outcome = "gave_up"
	}
	_, err := l.pool.Exec(ctx, `INSERT INTO close_deliveries (board_key, win, period, version, grp, outcome, done_ms)
		SELECT c.board_key, c.win, c.period, c.version, $5, $6, $7
		FROM closes c JOIN boards b ON b.board_key = c.board_key AND b.deleted_at IS NULL
		WHERE b.id = $1 AND c.win = $2 AND c.period = $3 AND c.version = $4
		ON CONFLICT (board_key, win, period, version, grp) DO UPDATE
		SET outcome = excluded.outcome, done_ms = excluded.done_ms WHERE close_deliveries.outcome IS NULL`,
		[]byte(board), string(w), period, version, group, outcome, at.UnixMilli())
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// DeliveryDone reports whether the delivery of a version of the live board's frozen standings to a webhook
// consumer group has completed (Delivered).
func (l *Ledger) DeliveryDone(ctx context.Context, board string, w leaderboard.Window, period string, version int,
	group string) (bool, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	var done bool
	err := l.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM close_deliveries d
		JOIN boards b ON b.board_key = d.board_key AND b.deleted_at IS NULL
		WHERE b.id = $1 AND d.win = $2 AND d.period = $3 AND d.version = $4 AND d.grp = $5 AND d.outcome IS NOT NULL)`,
		[]byte(board), string(w), period, version, group).Scan(&done)
	if err != nil {
		return false, unavailable(err)
	}
	return done, nil
}
