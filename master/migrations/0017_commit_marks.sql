-- 0017: commit marks (PostgreSQL's writer; SQLite writes none). Each write transaction inserts
-- one; when the answer to its COMMIT is lost, the writer looks its mark up before it retries,
-- so a batch that did land is never applied twice (issue 39). Kept an hour, then pruned.
CREATE TABLE commit_marks (
    token TEXT PRIMARY KEY,
    at    REAL NOT NULL
);
