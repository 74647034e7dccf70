-- 0016: attempt logs in the database, for masters on PostgreSQL (a lone SQLite master keeps them
-- as files under its data dir): every master reads what the leader of the moment stored, so a
-- log does not depend on which master received it (issue 39). One row per chunk a worker sent,
-- ``pos`` its first byte's offset in the part's log; ``node`` is '' for rank 0 / a one-node attempt.
CREATE TABLE attempt_logs (
    job_id  TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    node    TEXT NOT NULL,
    pos     BIGINT NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (job_id, attempt, node, pos)
);
