-- Webhook deliveries of close events. Redis holds the outbox and the consumer groups that deliver it, and may
-- lose them (a FLUSHALL, a restart without persistence) before an event was delivered; the ledger keeps, per
-- version of a period's frozen standings and per webhook consumer group configured when the version was frozen,
-- whether its delivery completed, so that a version whose delivery did not complete and whose outbox entry Redis
-- no longer holds is sent again (leaderboard/resend.go), and a delivered one is not.

-- +goose Up
-- When the close event that announced a version was recorded (unix ms, the recording store's clock): the payload's
-- recordedAt, sent again as it was the first time. NULL for versions announced before this migration.
ALTER TABLE closes ADD COLUMN announced_ms bigint;

CREATE TABLE close_deliveries (
	board_key bigint  NOT NULL,
	win       text    NOT NULL,
	period    text    NOT NULL,
	version   integer NOT NULL,
	grp       text    NOT NULL, -- the webhook's consumer group ('wh:' and 16 hex digits of its URL's SHA-256)
	outcome   text,             -- NULL: not completed; 'delivered': a 2xx answer; 'gave_up': dead-lettered
	done_ms   bigint,           -- unix ms when it completed
	PRIMARY KEY (board_key, win, period, version, grp),
	FOREIGN KEY (board_key, win, period, version) REFERENCES closes
);
-- The deliveries not completed: what a check for events to send again reads (bounded by them, not by history).
CREATE INDEX close_deliveries_open ON close_deliveries (board_key) WHERE outcome IS NULL;

-- +goose Down
DROP TABLE close_deliveries;
ALTER TABLE closes DROP COLUMN announced_ms;
