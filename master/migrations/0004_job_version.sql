-- 0004: each job row's change counter (horus_core.model.Job.version): 0 at submission, +1 on
-- every committed change of the row. Caches key on (id, version).

ALTER TABLE jobs ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
