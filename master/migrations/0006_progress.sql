-- 0006: what jobs reported through horus_core.progress (step, loss, samples/s), bounded per job,
-- so a restarted master keeps each job's loss curve (optimus's fit, hctl job's estimate).
-- Migrations are append-only: never edit a released file, add 0007_*.sql.

CREATE TABLE job_progress (
    job_id        TEXT NOT NULL,
    seq           INTEGER NOT NULL,                        -- per job, increasing
    attempt       INTEGER NOT NULL,
    step          INTEGER NOT NULL,
    loss          REAL,                                    -- NULL: the job reported none
    samples_per_s REAL NOT NULL DEFAULT 0,
    at            REAL NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- The GPU count of every assignment (elastic jobs change it between attempts): with job_events'
-- RUNNING spans it rebuilds each job's attained service (GPU-seconds) when the master restarts.
CREATE TABLE attempt_gpus (
    job_id  TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    gpus    INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
);

CREATE TRIGGER job_attempt_gpus AFTER UPDATE OF state, attempt ON jobs
WHEN NEW.state = 'ASSIGNED' AND (OLD.state IS NOT NEW.state OR OLD.attempt IS NOT NEW.attempt)
BEGIN
    INSERT OR REPLACE INTO attempt_gpus (job_id, attempt, gpus)
    VALUES (NEW.id, NEW.attempt, json_array_length(NEW.gpus));
END;
