-- The durable record of every board: its events in order (the index in Redis is rebuilt from them).
-- Ids and names are bytea: clients may send any UTF-8, NUL included, which text cannot hold.

-- +goose Up
CREATE TABLE boards (
	-- board_key is the ledger's own id of a board: a board id deleted and created again is a new board.
	board_key  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         bytea       NOT NULL,
	definition text        NOT NULL, -- the stored definition (JSON), exactly as the index keeps it
	head       bigint      NOT NULL DEFAULT 0, -- seq of the board's last event: its high-water mark
	created_at timestamptz NOT NULL DEFAULT now(),
	deleted_at timestamptz
);
-- At most one live board per id.
CREATE UNIQUE INDEX boards_live_id ON boards (id) WHERE deleted_at IS NULL;

CREATE TABLE events (
	board_key   bigint   NOT NULL REFERENCES boards,
	seq         bigint   NOT NULL, -- 1, 2, 3, … per board, without gaps: the order the index applies them in
	kind        smallint NOT NULL, -- leaderboard.EventKind
	player      bytea,
	score       float8,
	event_id    bytea,             -- the client's eventId (NULL: none; the API names such an event '#<seq>')
	fingerprint text,
	achieved_ms bigint,            -- unix ms
	recorded_ms bigint   NOT NULL, -- unix ms: the clock the index applied the event with
	name        bytea,             -- NULL: the event set no display name
	meta        text,              -- NULL: the event set no metadata (a compact JSON object)
	args        text,              -- the other kinds' arguments (JSON)
	voided_ms   bigint,            -- unix ms when a voidScoreEvents voided this submission (NULL: it counts)
	void_reason text,
	PRIMARY KEY (board_key, seq)
);
-- eventIds are unique per board, for ever (the index's dedupe records expire; these do not).
CREATE UNIQUE INDEX events_event_id ON events (board_key, event_id) WHERE event_id IS NOT NULL;
-- A player's events, oldest first (fraud review).
CREATE INDEX events_player ON events (board_key, player, seq) WHERE player IS NOT NULL;

-- +goose Down
DROP TABLE events;
DROP TABLE boards;
