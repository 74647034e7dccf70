-- 0006 for PostgreSQL (see ../0006_progress.sql): the trigger as a function, the upsert spelled out.

CREATE TABLE job_progress (
    job_id        TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    step          BIGINT NOT NULL,
    loss          DOUBLE PRECISION,
    samples_per_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    at            DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE attempt_gpus (
    job_id  TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    gpus    INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
);

CREATE FUNCTION horus_job_attempt_gpus() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO attempt_gpus (job_id, attempt, gpus)
    VALUES (NEW.id, NEW.attempt, json_array_length(NEW.gpus::json))
    ON CONFLICT (job_id, attempt) DO UPDATE SET gpus = EXCLUDED.gpus;
    RETURN NULL;
END $$;
CREATE TRIGGER job_attempt_gpus AFTER UPDATE OF state, attempt ON jobs FOR EACH ROW
WHEN (NEW.state = 'ASSIGNED' AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.attempt IS DISTINCT FROM NEW.attempt))
EXECUTE FUNCTION horus_job_attempt_gpus();
