-- 0001: the initial schema. Migrations are append-only: never edit a released file, add 0002_*.sql.

CREATE TABLE jobs (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,  -- submission order; paging key
    id                 TEXT NOT NULL UNIQUE,
    request_id         TEXT UNIQUE,                        -- client-chosen; NULL = not idempotent
    owner              TEXT NOT NULL,
    spec               TEXT NOT NULL,                      -- JSON
    state              TEXT NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,
    submitted_at       REAL NOT NULL,
    updated_at         REAL NOT NULL,
    started_at         REAL,
    finished_at        REAL,
    node               TEXT NOT NULL DEFAULT '',
    gpus               TEXT NOT NULL DEFAULT '[]',         -- JSON list of GPU UUIDs
    reason             TEXT NOT NULL DEFAULT '',
    exit_code          INTEGER,
    predicted_slowdown REAL NOT NULL DEFAULT 1.0,
    cancel_requested   INTEGER NOT NULL DEFAULT 0          -- a Kill was sent; CANCELLED on confirmation
);
CREATE INDEX jobs_by_state ON jobs (state, seq);
CREATE INDEX jobs_by_owner ON jobs (owner, seq);
CREATE INDEX jobs_by_node ON jobs (node, state) WHERE state IN ('ASSIGNED', 'RUNNING');

CREATE TABLE job_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL REFERENCES jobs (id),
    at         REAL NOT NULL,
    from_state TEXT,                                       -- NULL for the submission
    to_state   TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    node       TEXT NOT NULL DEFAULT '',
    reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_events_by_job ON job_events (job_id, attempt);

-- Every state change is recorded by the database itself, whatever code path made it.
CREATE TRIGGER job_submitted AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_events (job_id, at, from_state, to_state, attempt, node, reason)
    VALUES (NEW.id, NEW.submitted_at, NULL, NEW.state, NEW.attempt, NEW.node, 'submitted');
END;

CREATE TRIGGER job_state_changed AFTER UPDATE OF state, attempt ON jobs
WHEN OLD.state IS NOT NEW.state OR OLD.attempt IS NOT NEW.attempt
BEGIN
    INSERT INTO job_events (job_id, at, from_state, to_state, attempt, node, reason)
    VALUES (NEW.id, NEW.updated_at, OLD.state, NEW.state, NEW.attempt, NEW.node, NEW.reason);
END;

CREATE TABLE nodes (
    name          TEXT PRIMARY KEY,
    gpus          TEXT NOT NULL,                           -- JSON list of GPU objects
    state         TEXT NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    registered_at REAL NOT NULL,
    last_seen     REAL NOT NULL                            -- at the last state change (heartbeats stay in memory)
);

CREATE TABLE profiles (
    job_type   TEXT PRIMARY KEY,                           -- workload signature
    util_avg   REAL NOT NULL,
    util_peak  REAL NOT NULL,
    mem_mib    INTEGER NOT NULL,
    samples    INTEGER NOT NULL,
    co_speed   TEXT NOT NULL DEFAULT '{}',                 -- JSON {signature: normalised speed}
    updated_at REAL NOT NULL
);

-- What one attempt measured (folded from heartbeats and progress when the attempt ends).
CREATE TABLE attempt_stats (
    job_id         TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    node           TEXT NOT NULL,
    job_type       TEXT NOT NULL DEFAULT '',
    samples        INTEGER NOT NULL,
    solo_samples   INTEGER NOT NULL,
    util_avg       REAL NOT NULL,
    util_peak      REAL NOT NULL,
    mem_peak_mib   INTEGER NOT NULL,
    last_step      INTEGER NOT NULL DEFAULT 0,
    last_loss      REAL,
    samples_per_s  REAL,
    PRIMARY KEY (job_id, attempt)
);
