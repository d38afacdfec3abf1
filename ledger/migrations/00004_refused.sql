-- A submission the index refused (RATE_LIMITED, PERIOD_CLOSED, a SUM total out of range) changed nothing, so its
-- eventId is free again, as without the ledger (Redis keeps no dedupe record of a refusal): a retry with it is a
-- new attempt. Ledger.Refuse moves the refused event's eventId here, out of the unique index, and scoreEvents
-- still shows it. A void keeps its events' eventIds: a retry of a voided submission must not count again.
-- Refusals recorded before (void_reason 'refused (<code>): <message>', refusalReason in leaderboard/sequencer.go, with
-- a refusal's code: IsRefusal) free their eventIds here too, so that no reader tells the two kinds apart.

-- +goose Up
ALTER TABLE events ADD COLUMN refused_event_id bytea;
UPDATE events SET refused_event_id = event_id, event_id = NULL
WHERE kind = 1 AND event_id IS NOT NULL AND voided_ms IS NOT NULL
	AND void_reason ~ '^refused \((BAD_USER_INPUT|CONFLICT|PERIOD_CLOSED|RATE_LIMITED)\): ';

-- +goose Down
UPDATE events SET event_id = refused_event_id WHERE refused_event_id IS NOT NULL AND NOT EXISTS
	(SELECT 1 FROM events o WHERE o.board_key = events.board_key AND o.event_id = events.refused_event_id);
ALTER TABLE events DROP COLUMN refused_event_id;
