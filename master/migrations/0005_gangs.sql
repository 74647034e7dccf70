-- 0005: multi-node gangs (issue 11). ``nodes``: the nodes of the current/last attempt in rank
-- order (JSON list; empty for an attempt on one node). ``parts``: each part's state in that order
-- (JSON list of horus_core.gang.Part values). Migrations are append-only: add 0006_*.sql.

ALTER TABLE jobs ADD COLUMN nodes TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN parts TEXT NOT NULL DEFAULT '[]';
