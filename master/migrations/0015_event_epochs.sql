-- 0015: the leader's epoch under which each job event was written (docs/ha.md). On PostgreSQL the
-- leader's fence names its epoch for the transaction (horus.epoch) and the column's default takes
-- it; a SQLite store has one master and writes 0. Migrations are append-only: add the next number.

ALTER TABLE job_events ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
