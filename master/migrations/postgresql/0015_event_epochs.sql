-- 0015 for PostgreSQL (see ../0015_event_epochs.sql): the default reads the epoch the fence set
-- for the transaction (0 outside one: the migrations, a write of a lone master).

ALTER TABLE job_events ADD COLUMN epoch BIGINT NOT NULL
    DEFAULT COALESCE(NULLIF(current_setting('horus.epoch', true), ''), '0')::bigint;
