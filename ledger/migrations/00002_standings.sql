-- Frozen standings: a closed period's final ranking, written before its close event goes out. A void of one of
-- its events writes a new version (with the reason); readers take the newest. Nothing here is updated in place
-- but the outbox id of the close event that announced a version.

-- +goose Up
CREATE TABLE closes (
	board_key bigint   NOT NULL REFERENCES boards,
	win       text     NOT NULL, -- the window (leaderboard.Window)
	period    text     NOT NULL, -- the period key or season id
	version   integer  NOT NULL, -- 1 at the close; each correction adds one
	reason    text     NOT NULL DEFAULT '', -- why this version replaced the one before ('' for version 1)
	ended_ms  bigint   NOT NULL, -- unix ms: when the period ended
	frozen_ms bigint   NOT NULL, -- unix ms: when this version was written
	size      bigint   NOT NULL, -- players with a score in the period
	rows      bigint   NOT NULL, -- rows in standings (the exact ranking: on exactTop boards, the exact tier)
	outbox_id text,              -- the close event that announced this version (NULL: not sent yet)
	PRIMARY KEY (board_key, win, period, version)
);

CREATE TABLE standings (
	board_key  bigint  NOT NULL,
	win        text    NOT NULL,
	period     text    NOT NULL,
	version    integer NOT NULL,
	rank       bigint  NOT NULL,
	tie_rank   bigint  NOT NULL,
	player     bytea   NOT NULL,
	score      float8  NOT NULL,
	name       bytea,            -- NULL: no display name
	meta       text,             -- NULL: no metadata (a compact JSON object)
	updated_ms bigint  NOT NULL, -- unix ms
	PRIMARY KEY (board_key, win, period, version, rank),
	FOREIGN KEY (board_key, win, period, version) REFERENCES closes
);
CREATE UNIQUE INDEX standings_player ON standings (board_key, win, period, version, player);

-- +goose Down
DROP TABLE standings;
DROP TABLE closes;
