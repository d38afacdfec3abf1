package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// boardKeys caches the live board_key of board ids. A stale entry (the board was deleted, by this process or
// another) is found out by lb_append, which refuses a deleted board; the entry is then read again.
type boardKeys struct{ m sync.Map }

func (k *boardKeys) forget(id string) { k.m.Delete(id) }

// key returns the live board_key of id, or 0 when the ledger holds no live board with that id.
func (l *Ledger) key(ctx context.Context, q querier, id string) (int64, error) {
	if v, ok := l.keys.m.Load(id); ok {
		return v.(int64), nil
	}
	var key int64
	err := q.QueryRow(ctx, `SELECT board_key FROM boards WHERE id = $1 AND deleted_at IS NULL`, []byte(id)).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	l.keys.m.Store(id, key)
	return key, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Append records the batches' events in one transaction (one commit, one fsync, however many boards and events)
// and returns, per batch, what it made of each event. A batch whose board the ledger does not hold is NotFound
// and the whole call fails; a board created by an EventCreate must be the only event of its batch.
func (l *Ledger) Append(ctx context.Context, batches []leaderboard.AppendBatch) ([][]leaderboard.Appended, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		out, err := l.append(ctx, batches)
		if err == nil {
			return out, nil
		}
		var pe *pgconn.PgError
		retry := errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001" || pe.Code == "23505") // deadlock, serialization, a create raced
		if errors.Is(err, errBoardGone) {
			retry = true // read the board's key again: another process deleted (and maybe re-created) it
		}
		if !retry || attempt == 2 {
			var le *leaderboard.Error
			if errors.As(err, &le) {
				return nil, err
			}
			return nil, unavailable(err)
		}
	}
}

func (l *Ledger) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < l.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.timeout)
}

// appendSQL records a board's events in one statement: the eventIds recorded before (old), the new events
// numbered from the board's head (fresh: the first of each eventId in the call), the head moved past them under
// the board's row lock, and the rows inserted. It answers, per event in order, the head before (NULL: the board
// is not live), the event's number among the new ones, or the seq and fingerprint of the recorded one.
const appendSQL = `WITH inp AS (
	SELECT t.*, t.event_id IS NULL OR t.ord = min(t.ord) OVER (PARTITION BY t.event_id) AS first_in_call
	FROM unnest($2::smallint[], $3::bytea[], $4::float8[], $5::bytea[], $6::text[], $7::bigint[], $8::bytea[],
		$9::text[], $10::text[]) WITH ORDINALITY AS t(kind, player, score, event_id, fp, achieved, name, meta, args, ord)
), old AS (
	SELECT i.ord, e.seq, e.fingerprint FROM inp i JOIN events e ON e.board_key = $1 AND e.event_id = i.event_id
), fresh AS (
	SELECT i.*, row_number() OVER (ORDER BY i.ord) AS n FROM inp i
	WHERE i.first_in_call AND NOT EXISTS (SELECT 1 FROM old o WHERE o.ord = i.ord)
), h AS (
	UPDATE boards SET head = head + (SELECT count(*) FROM fresh),
		deleted_at = CASE WHEN EXISTS (SELECT 1 FROM fresh WHERE kind = 4) THEN now() END
	WHERE board_key = $1 AND deleted_at IS NULL
	RETURNING head - (SELECT count(*) FROM fresh) AS base
), ins AS (
	INSERT INTO events (board_key, seq, kind, player, score, event_id, fingerprint, achieved_ms, recorded_ms, name,
		meta, args)
	SELECT $1, h.base + f.n, f.kind, f.player, f.score, f.event_id, f.fp, f.achieved, $11, f.name, f.meta, f.args
	FROM fresh f, h
	RETURNING 1
)
SELECT (SELECT base FROM h), f.n, o.seq, o.fingerprint, (SELECT count(*) FROM ins)
FROM inp i LEFT JOIN fresh f ON f.ord = i.ord LEFT JOIN old o ON o.ord = i.ord ORDER BY i.ord`

// appendPlainSQL is appendSQL for a batch in which no event carries an eventId and none deletes the board (most
// batches): every event is new, numbered from the board's head in order, so there is nothing to look up, and it
// answers one row: the head before (NULL: the board is not live) and the rows inserted.
const appendPlainSQL = `WITH h AS (
	UPDATE boards SET head = head + cardinality($2::smallint[])
	WHERE board_key = $1 AND deleted_at IS NULL
	RETURNING head - cardinality($2::smallint[]) AS base
), ins AS (
	INSERT INTO events (board_key, seq, kind, player, score, event_id, fingerprint, achieved_ms, recorded_ms, name,
		meta, args)
	SELECT $1, h.base + t.ord, t.kind, t.player, t.score, t.event_id, t.fp, t.achieved, $11, t.name, t.meta, t.args
	FROM h, unnest($2::smallint[], $3::bytea[], $4::float8[], $5::bytea[], $6::text[], $7::bigint[], $8::bytea[],
		$9::text[], $10::text[]) WITH ORDINALITY AS t(kind, player, score, event_id, fp, achieved, name, meta, args, ord)
	RETURNING 1
)
SELECT (SELECT base FROM h), (SELECT count(*) FROM ins)`

// plainBatch reports whether appendPlainSQL may record b.
func plainBatch(b leaderboard.AppendBatch) bool {
	for _, e := range b.Events {
		if e.EventID != "" || e.Kind == leaderboard.EventDelete {
			return false
		}
	}
	return true
}

// append records the batches in one round trip: creations first (each a transaction of its own), then every
// other batch's statement in one pipeline, which PostgreSQL runs as one implicit transaction (one commit).
func (l *Ledger) append(ctx context.Context, batches []leaderboard.AppendBatch) ([][]leaderboard.Appended, error) {
	out := make([][]leaderboard.Appended, len(batches))
	// Lock boards in one order, so that two commits over the same boards cannot deadlock.
	order := make([]int, 0, len(batches))
	for i, b := range batches {
		if isCreate(b) {
			var err error
			if out[i], err = l.createTx(ctx, b); err != nil {
				return nil, err
			}
			continue
		}
		order = append(order, i)
	}
	if len(order) == 0 {
		return out, nil
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(batches[a].Board, batches[b].Board) })
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	keys := make([]int64, len(batches))
	for _, i := range order {
		if keys[i], err = l.key(ctx, conn, batches[i].Board); err != nil {
			return nil, err
		}
		if keys[i] == 0 {
			return nil, notInLedger(batches[i].Board)
		}
	}
	var pb pgx.Batch
	plain := make([]bool, len(batches)) // recorded by appendPlainSQL
	for _, i := range order {
		b := batches[i]
		c := appendArgs(b)
		recorded := b.RecordedAt.UnixMilli()
		stmt := appendSQL
		if plain[i] = plainBatch(b); plain[i] {
			stmt = appendPlainSQL
		}
		pb.Queue(stmt, keys[i], c.kind, c.player, c.score, c.eventID, c.fp, c.achieved, c.name, c.meta, c.args,
			recorded)
		for _, e := range b.Events {
			if e.Kind == leaderboard.EventVoid {
				q, args, err := voidSQL(keys[i], recorded, e.Args)
				if err != nil {
					return nil, err
				}
				pb.Queue(q, args...)
			}
		}
	}
	br := conn.SendBatch(ctx, &pb)
	defer br.Close()
	for _, i := range order {
		b := batches[i]
		res := make([]leaderboard.Appended, len(b.Events))
		if plain[i] {
			var base *int64
			var inserted int64
			if err := br.QueryRow().Scan(&base, &inserted); err != nil {
				return nil, err
			}
			if base == nil {
				l.keys.forget(b.Board)
				return nil, errBoardGone
			}
			if inserted != int64(len(b.Events)) {
				return nil, fmt.Errorf("ledger: %d events recorded of %d", inserted, len(b.Events))
			}
			for k, e := range b.Events {
				res[k] = leaderboard.Appended{Seq: *base + int64(k) + 1, Fingerprint: e.Fingerprint, Board: keys[i]}
			}
			if err := readVoids(br, b, res); err != nil {
				return nil, err
			}
			out[i] = res
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		firstOf := map[string]int{} // eventId -> index of its first new event in this call
		k := 0
		for rows.Next() {
			var base, n, oldSeq *int64
			var oldFP *string
			var inserted int64
			if err := rows.Scan(&base, &n, &oldSeq, &oldFP, &inserted); err != nil {
				rows.Close()
				return nil, err
			}
			if base == nil {
				rows.Close()
				l.keys.forget(b.Board)
				return nil, errBoardGone
			}
			e := &b.Events[k]
			switch {
			case n != nil:
				res[k] = leaderboard.Appended{Seq: *base + *n, Fingerprint: e.Fingerprint, Board: keys[i]}
				if e.EventID != "" {
					firstOf[e.EventID] = k
				}
			case oldSeq != nil:
				res[k] = leaderboard.Appended{Seq: *oldSeq, Duplicate: true, Fingerprint: deref(oldFP), Board: keys[i]}
			default: // a later event with an eventId new in this call
				f, ok := firstOf[e.EventID]
				if !ok {
					rows.Close()
					return nil, fmt.Errorf("ledger: event %d of the call has no seq", k)
				}
				res[k] = leaderboard.Appended{Seq: res[f].Seq, Duplicate: true, Fingerprint: res[f].Fingerprint,
					Board: keys[i]}
			}
			k++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if k != len(b.Events) {
			return nil, fmt.Errorf("ledger: %d answers for %d events", k, len(b.Events))
		}
		if err := readVoids(br, b, res); err != nil {
			return nil, err
		}
		out[i] = res
	}
	if err := br.Close(); err != nil { // the commit
		return nil, err
	}
	for _, i := range order {
		for _, e := range batches[i].Events {
			if e.Kind == leaderboard.EventDelete {
				l.keys.forget(batches[i].Board)
			}
		}
	}
	return out, nil
}

// readVoids reads the answers of a batch's void statements (queued after its append) into res.
func readVoids(br pgx.BatchResults, b leaderboard.AppendBatch, res []leaderboard.Appended) error {
	for j, e := range b.Events {
		if e.Kind != leaderboard.EventVoid {
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		res[j].Voided = int(tag.RowsAffected())
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// createTx records a board's creation in a transaction of its own.
func (l *Ledger) createTx(ctx context.Context, b leaderboard.AppendBatch) ([]leaderboard.Appended, error) {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	res, _, err := l.create(ctx, tx, b)
	if err != nil {
		return nil, err
	}
	return res, tx.Commit(ctx)
}

var errBoardGone = errors.New("ledger: the board was deleted")

func notInLedger(board string) error {
	return &leaderboard.Error{Code: leaderboard.NotFound,
		Message: fmt.Sprintf("no leaderboard with id %q in the ledger", board)}
}

func isCreate(b leaderboard.AppendBatch) bool {
	return len(b.Events) == 1 && b.Events[0].Kind == leaderboard.EventCreate
}

// create records a new board (its definition and its first event, seq 1) unless a live board with the id
// exists: then the event is a duplicate when the definition is the same, and a Conflict otherwise.
func (l *Ledger) create(ctx context.Context, tx pgx.Tx, b leaderboard.AppendBatch) ([]leaderboard.Appended, int64, error) {
	def := string(b.Events[0].Args)
	var key int64
	var cur string
	err := tx.QueryRow(ctx, `SELECT board_key, definition FROM boards WHERE id = $1 AND deleted_at IS NULL FOR UPDATE`,
		[]byte(b.Board)).Scan(&key, &cur)
	switch {
	case err == nil && cur == def:
		return []leaderboard.Appended{{Seq: 1, Duplicate: true, Board: key}}, key, nil
	case err == nil:
		return nil, 0, &leaderboard.Error{Code: leaderboard.Conflict,
			Message: "a board with this id exists with a different definition"}
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, 0, err
	}
	if err := tx.QueryRow(ctx, `INSERT INTO boards (id, definition, head) VALUES ($1, $2, 1) RETURNING board_key`,
		[]byte(b.Board), def).Scan(&key); err != nil {
		return nil, 0, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (board_key, seq, kind, recorded_ms, args) VALUES ($1, 1, $2, $3, $4)`,
		key, int16(leaderboard.EventCreate), b.RecordedAt.UnixMilli(), def); err != nil {
		return nil, 0, err
	}
	l.keys.m.Store(b.Board, key)
	return []leaderboard.Appended{{Seq: 1, Board: key}}, key, nil
}

// voidSQL is the statement that marks the submissions a void's arguments name (client eventIds, or '#<seq>' for
// one recorded without) as voided, unless they are already; its row count is how many it marked.
func voidSQL(key, recorded int64, args []byte) (string, []any, error) {
	var a leaderboard.VoidArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return "", nil, fmt.Errorf("ledger: void arguments: %w", err)
	}
	ids := make([][]byte, 0, len(a.EventIDs))
	seqs := []int64{}
	for _, id := range a.EventIDs {
		ids = append(ids, []byte(id))
		if n, ok := leaderboard.AssignedSeq(id); ok {
			seqs = append(seqs, n)
		}
	}
	return `UPDATE events SET voided_ms = $2, void_reason = $3
		WHERE board_key = $1 AND kind = $4 AND voided_ms IS NULL
		AND (event_id = ANY($5) OR (event_id IS NULL AND seq = ANY($6)))`,
		[]any{key, recorded, a.Reason, int16(leaderboard.EventSubmit), ids, seqs}, nil
}

// columns are a batch's events as appendSQL's arrays (NULL where an event has no value).
type columns struct {
	kind                  []int16
	player, eventID, name [][]byte
	fp, meta, args        []*string
	score                 []*float64
	achieved              []*int64
}

func appendArgs(b leaderboard.AppendBatch) columns {
	n := len(b.Events)
	c := columns{kind: make([]int16, n), player: make([][]byte, n), eventID: make([][]byte, n),
		name: make([][]byte, n), fp: make([]*string, n), meta: make([]*string, n), args: make([]*string, n),
		score: make([]*float64, n), achieved: make([]*int64, n)}
	for i := range b.Events {
		e := &b.Events[i]
		c.kind[i] = int16(e.Kind)
		if e.Player != "" {
			c.player[i] = []byte(e.Player)
		}
		if e.EventID != "" {
			c.eventID[i] = []byte(e.EventID)
		}
		if e.Name != nil {
			c.name[i] = []byte(*e.Name)
		}
		if e.Fingerprint != "" {
			c.fp[i] = &e.Fingerprint
		}
		c.meta[i] = e.Meta
		if len(e.Args) > 0 {
			a := string(e.Args)
			c.args[i] = &a
		}
		if e.Kind == leaderboard.EventSubmit {
			c.score[i] = &e.Score
			if !e.AchievedAt.IsZero() {
				ms := e.AchievedAt.UnixMilli()
				c.achieved[i] = &ms
			}
		}
	}
	return c
}

// Refuse marks the board's submissions the index refused when they were applied as voided at recorded, with the
// refusal as the reason, unless they are voided already: replays skip them as they skip voided ones. Their eventIds
// are freed (moved to refused_event_id, migration 00004): a refusal changed nothing, so a retry is a new attempt,
// as without the ledger. One statement, committed on its own (the refusals are rare: a round of writes that has
// some), before the refusal is answered: a retry sent after the answer finds the eventId free.
func (l *Ledger) Refuse(ctx context.Context, board string, recorded time.Time, refusals []leaderboard.Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	key, err := l.key(ctx, l.pool, board)
	if err != nil || key == 0 {
		return err
	}
	seqs := make([]int64, len(refusals))
	reasons := make([]string, len(refusals))
	for i, r := range refusals {
		seqs[i], reasons[i] = r.Seq, strings.ReplaceAll(r.Reason, "\x00", "") // text holds no NUL
	}
	_, err = l.pool.Exec(ctx, `UPDATE events SET voided_ms = $2, void_reason = r.reason,
			refused_event_id = event_id, event_id = NULL
		FROM unnest($3::bigint[], $4::text[]) AS r(seq, reason)
		WHERE board_key = $1 AND kind = $5 AND events.seq = r.seq AND voided_ms IS NULL`,
		key, recorded.UnixMilli(), seqs, reasons, int16(leaderboard.EventSubmit))
	return err
}
