// Package ledger is the durable record of every board in PostgreSQL: each accepted write is an event, committed
// (synchronously, in group commits shared by concurrent writes) before the index in Redis applies it. A board's
// events have sequence numbers without gaps, and the index applies them in that order, so the index is a
// function of the ledger and can be rebuilt from it (see DESIGN.md, "The durable record").
//
// It implements leaderboard.Ledger; package leaderboard decides when to write and what to apply.
package ledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/leaderboard/leaderboard/leaderboard"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config configures a Ledger.
type Config struct {
	// URL is the PostgreSQL connection string (DATABASE_URL), e.g. postgres://user:pass@host:5432/db.
	URL string
	// MaxConns bounds the pool's connections. Default 16.
	MaxConns int32
	// Timeout bounds one commit's round trip when the caller's context has no earlier deadline. Default 5 s.
	Timeout time.Duration
}

// Ledger is the record in one PostgreSQL database. Safe for concurrent use.
type Ledger struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	keys    boardKeys
}

var _ leaderboard.Ledger = (*Ledger)(nil)

// Open connects to the database and brings its schema up to date (the embedded migrations, applied under
// goose's lock, so several servers starting together migrate once).
func Open(ctx context.Context, cfg Config) (*Ledger, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("ledger: DATABASE_URL: %w", err)
	}
	pc.MaxConns = cfg.MaxConns
	if pc.MaxConns <= 0 {
		pc.MaxConns = 16
	}
	// Every commit must be durable before the index applies it, whatever the database's default says.
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	l := &Ledger{pool: pool, timeout: cfg.Timeout}
	if l.timeout <= 0 {
		l.timeout = 5 * time.Second
	}
	return l, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("ledger: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("ledger: migrating the schema: %w", err)
	}
	return nil
}

// Close closes the pool.
func (l *Ledger) Close() { l.pool.Close() }

// Pool is the connection pool (tests read the tables with it).
func (l *Ledger) Pool() *pgxpool.Pool { return l.pool }

// unavailable wraps a database error for clients: the write was not recorded, and not applied.
func unavailable(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57", "58": // connection, resources, operator intervention (a shutdown), system errors
		default:
			return &leaderboard.Error{Code: leaderboard.Internal, Message: "internal error", Err: err}
		}
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &leaderboard.Error{Code: leaderboard.Unavailable, Message: "the ledger is unavailable", Err: err}
}
