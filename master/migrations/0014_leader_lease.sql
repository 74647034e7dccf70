-- 0014: leadership among masters sharing one PostgreSQL (docs/ha.md). One lease row: who leads,
-- where clients reach it, its epoch (+1 at every takeover) and when it expires, in seconds since
-- the epoch on the database's clock. Every write of a leader checks the row in its own
-- transaction (master/store/lease.py). A SQLite store has one master and never reads it.
-- Migrations are append-only: never edit a released file, add the next number.

CREATE TABLE leader_lease (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    holder     TEXT NOT NULL DEFAULT '',
    address    TEXT NOT NULL DEFAULT '',
    epoch      BIGINT NOT NULL DEFAULT 0,
    expires_at REAL NOT NULL DEFAULT 0
);
INSERT INTO leader_lease (id) VALUES (1);

-- Every term: the epoch, who held it and when it began and was last renewed (database clock).
CREATE TABLE leader_terms (
    epoch      BIGINT PRIMARY KEY,
    holder     TEXT NOT NULL,
    address    TEXT NOT NULL,
    started_at REAL NOT NULL,
    renewed_at REAL NOT NULL
);
