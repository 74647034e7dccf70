-- 0016 for PostgreSQL (see ../0016_attempt_logs.sql): the chunks as BYTEA.
CREATE TABLE attempt_logs (
    job_id  TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    node    TEXT NOT NULL,
    pos     BIGINT NOT NULL,
    data    BYTEA NOT NULL,
    PRIMARY KEY (job_id, attempt, node, pos)
);
