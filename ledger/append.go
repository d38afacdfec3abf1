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

func (l *Ledger) append(ctx context.Context, batches []leaderboard.AppendBatch) ([][]leaderboard.Appended, error) {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	// Lock boards in one order, so that two commits over the same boards cannot deadlock.
	order := make([]int, len(batches))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(batches[a].Board, batches[b].Board) })
	out := make([][]leaderboard.Appended, len(batches))
	keys := make([]int64, len(batches))
	heads := make([]int64, len(batches))
	for _, i := range order {
		b := batches[i]
		if isCreate(b) {
			if out[i], keys[i], err = l.create(ctx, tx, b); err != nil {
				return nil, err
			}
			continue
		}
		if keys[i], err = l.key(ctx, tx, b.Board); err != nil {
			return nil, err
		}
		if keys[i] == 0 {
			return nil, notInLedger(b.Board)
		}
	}
	// One round trip: lock every board's row (its head) and find the eventIds recorded before.
	var pb pgx.Batch
	for _, i := range order {
		if isCreate(batches[i]) {
			continue
		}
		pb.Queue(`SELECT head FROM boards WHERE board_key = $1 AND deleted_at IS NULL FOR UPDATE`, keys[i])
		if ids := eventIDs(batches[i]); len(ids) > 0 {
			pb.Queue(`SELECT event_id, seq, coalesce(fingerprint, '') FROM events
				WHERE board_key = $1 AND event_id = ANY($2)`, keys[i], ids)
		}
	}
	type first struct {
		seq int64
		fp  string
	}
	seen := make([]map[string]first, len(batches))
	if pb.Len() > 0 {
		br := tx.SendBatch(ctx, &pb)
		for _, i := range order {
			if isCreate(batches[i]) {
				continue
			}
			if err := br.QueryRow().Scan(&heads[i]); err != nil {
				br.Close()
				if errors.Is(err, pgx.ErrNoRows) {
					l.keys.forget(batches[i].Board)
					return nil, errBoardGone
				}
				return nil, err
			}
			seen[i] = map[string]first{}
			if len(eventIDs(batches[i])) == 0 {
				continue
			}
			rows, _ := br.Query()
			for rows.Next() {
				var id []byte
				var f first
				if err := rows.Scan(&id, &f.seq, &f.fp); err != nil {
					rows.Close()
					br.Close()
					return nil, err
				}
				seen[i][string(id)] = f
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				br.Close()
				return nil, err
			}
		}
		if err := br.Close(); err != nil {
			return nil, err
		}
	}
	// Number the new events, and answer the duplicates (of earlier calls, or earlier in this one).
	var rows [][]any
	recorded := make([]int64, len(batches))
	for _, i := range order {
		b := batches[i]
		if isCreate(b) {
			continue
		}
		recorded[i] = b.RecordedAt.UnixMilli()
		res := make([]leaderboard.Appended, len(b.Events))
		h := heads[i]
		for k := range b.Events {
			e := &b.Events[k]
			if e.EventID != "" {
				if f, ok := seen[i][e.EventID]; ok {
					res[k] = leaderboard.Appended{Seq: f.seq, Duplicate: true, Fingerprint: f.fp}
					continue
				}
			}
			h++
			res[k] = leaderboard.Appended{Seq: h, Fingerprint: e.Fingerprint}
			if e.EventID != "" {
				seen[i][e.EventID] = first{h, e.Fingerprint}
			}
			rows = append(rows, eventRow(keys[i], h, recorded[i], e))
		}
		heads[i] = h
		out[i] = res
	}
	if len(rows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventCopyColumns, pgx.CopyFromRows(rows)); err != nil {
			return nil, err
		}
	}
	// Voids: the submissions they name stop counting (each once: voiding twice is a no-op).
	for _, i := range order {
		for k, e := range batches[i].Events {
			if e.Kind != leaderboard.EventVoid {
				continue
			}
			n, err := voidEvents(ctx, tx, keys[i], recorded[i], e.Args)
			if err != nil {
				return nil, err
			}
			out[i][k].Voided = n
		}
	}
	pb = pgx.Batch{}
	deleted := false
	for _, i := range order {
		b := batches[i]
		if isCreate(b) {
			continue
		}
		del := slices.ContainsFunc(b.Events, func(e leaderboard.LedgerEvent) bool { return e.Kind == leaderboard.EventDelete })
		deleted = deleted || del
		pb.Queue(`UPDATE boards SET head = $2, deleted_at = CASE WHEN $3 THEN now() END WHERE board_key = $1`,
			keys[i], heads[i], del)
	}
	if pb.Len() > 0 {
		if err := tx.SendBatch(ctx, &pb).Close(); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	if deleted {
		for _, b := range batches {
			l.keys.forget(b.Board)
		}
	}
	return out, nil
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
		return []leaderboard.Appended{{Seq: 1, Duplicate: true}}, key, nil
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
	return []leaderboard.Appended{{Seq: 1}}, key, nil
}

func eventIDs(b leaderboard.AppendBatch) [][]byte {
	var ids [][]byte
	for i := range b.Events {
		if id := b.Events[i].EventID; id != "" {
			ids = append(ids, []byte(id))
		}
	}
	return ids
}

var eventCopyColumns = []string{"board_key", "seq", "kind", "player", "score", "event_id", "fingerprint",
	"achieved_ms", "recorded_ms", "name", "meta", "args"}

// eventRow is an event as a row of events (NULL where it has no value).
func eventRow(key, seq, recorded int64, e *leaderboard.LedgerEvent) []any {
	var score, achieved, name, meta, args any
	if e.Kind == leaderboard.EventSubmit {
		score = e.Score
		if !e.AchievedAt.IsZero() {
			achieved = e.AchievedAt.UnixMilli()
		}
	}
	if e.Name != nil {
		name = []byte(*e.Name)
	}
	if e.Meta != nil {
		meta = *e.Meta
	}
	if len(e.Args) > 0 {
		args = string(e.Args)
	}
	return []any{key, seq, int16(e.Kind), optBytes(e.Player), score, optBytes(e.EventID), optText(e.Fingerprint),
		achieved, recorded, name, meta, args}
}

func optBytes(s string) any {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func optText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// voidEvents marks the submissions a void's arguments name (client eventIds, or '#<seq>' for one recorded
// without) as voided, unless they are already, and returns how many it marked.
func voidEvents(ctx context.Context, tx pgx.Tx, key, recorded int64, args []byte) (int, error) {
	var a leaderboard.VoidArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return 0, fmt.Errorf("ledger: void arguments: %w", err)
	}
	ids := make([][]byte, 0, len(a.EventIDs))
	var seqs []int64
	for _, id := range a.EventIDs {
		ids = append(ids, []byte(id))
		if n, ok := leaderboard.AssignedSeq(id); ok {
			seqs = append(seqs, n)
		}
	}
	tag, err := tx.Exec(ctx, `UPDATE events SET voided_ms = $2, void_reason = $3
		WHERE board_key = $1 AND kind = $4 AND voided_ms IS NULL
		AND (event_id = ANY($5) OR (event_id IS NULL AND seq = ANY($6)))`,
		key, recorded, a.Reason, int16(leaderboard.EventSubmit), ids, seqs)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
