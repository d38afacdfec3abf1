-- A submission the index refused (RATE_LIMITED, PERIOD_CLOSED, a SUM total out of range) changed nothing, so its
-- eventId is free again, as without the ledger (Redis keeps no dedupe record of a refusal): a retry with it is a
-- new attempt. Ledger.Refuse moves the refused event's eventId here, out of the unique index, and scoreEvents
-- still shows it. A void keeps its events' eventIds: a retry of a voided submission must not count again.

-- +goose Up
ALTER TABLE events ADD COLUMN refused_event_id bytea;

-- +goose Down
ALTER TABLE events DROP COLUMN refused_event_id;
