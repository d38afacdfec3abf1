package ledger

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Migration 00004 frees the eventIds of the refusals recorded before it (their void reasons in refusalReason's
// form, with a code IsRefusal takes), as Ledger.Refuse frees them since: a void of an admin keeps its eventId,
// also one whose reason looks like a refusal with another code, and so does a submission that counts. Down gives
// them back.
func TestMigrationFreesRecordedRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgtest.Shared(t).Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	var key int64
	if err := pool.QueryRow(ctx, `INSERT INTO boards (id, definition, head) VALUES ('b', '{}', 0) RETURNING board_key`).
		Scan(&key); err != nil {
		t.Fatal(err)
	}
	codes := []leaderboard.Code{leaderboard.Invalid, leaderboard.NotFound, leaderboard.Conflict,
		leaderboard.PeriodClosed, leaderboard.Unavailable, leaderboard.RateLimited, leaderboard.Internal}
	type row struct {
		eventID, reason string
		freed           bool
	}
	var rows []row
	for _, c := range codes {
		rows = append(rows, row{"r-" + string(c), fmt.Sprintf("refused (%s): limit (of 3): reached", c),
			leaderboard.IsRefusal(&leaderboard.Error{Code: c})})
	}
	rows = append(rows, row{"void", "speed hack", false}, row{"counts", "", false},
		row{"lower", "Refused (RATE_LIMITED): x", false}, row{"short", "refused (RATE_LIMITED)", false})
	for i, r := range rows {
		var voided any
		if r.reason != "" {
			voided = int64(1)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO events (board_key, seq, kind, player, score, event_id, recorded_ms,
			voided_ms, void_reason) VALUES ($1, $2, 1, 'p', 1, $3, 0, $4, NULLIF($5, ''))`,
			key, i+1, []byte(r.eventID), voided, r.reason); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		var eventID, refused []byte
		if err := pool.QueryRow(ctx, `SELECT event_id, refused_event_id FROM events WHERE board_key = $1 AND seq = $2`,
			key, i+1).Scan(&eventID, &refused); err != nil {
			t.Fatal(err)
		}
		want, wantRefused := r.eventID, ""
		if r.freed {
			want, wantRefused = "", r.eventID
		}
		if string(eventID) != want || string(refused) != wantRefused {
			t.Errorf("after 00004: %q (%q): event_id %q, refused_event_id %q; want %q, %q", r.eventID, r.reason,
				eventID, refused, want, wantRefused)
		}
	}
	if _, err := p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	// Down drops refused_event_id: the eventIds are back in event_id.
	for i, r := range rows {
		var eventID []byte
		if err := pool.QueryRow(ctx, `SELECT event_id FROM events WHERE board_key = $1 AND seq = $2`, key, i+1).
			Scan(&eventID); err != nil {
			t.Fatal(err)
		}
		if string(eventID) != r.eventID {
			t.Errorf("after 00004's down: %q has event_id %q", r.eventID, eventID)
		}
	}
}
