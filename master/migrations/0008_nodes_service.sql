-- 0008: nodes out of service and pending-reason codes (docs/nodes.md, docs/reasons.md).
-- Migrations are append-only: never edit a released file, add the next number.

-- Why a pending job waits, as a code of the fixed vocabulary (horus_core.reasoncodes).
ALTER TABLE jobs ADD COLUMN reason_code TEXT NOT NULL DEFAULT '';

-- An admin's cordon or drain of a node; no row = in service. Kept apart from ``nodes`` (which
-- every registration rewrites) so that it outlives worker restarts and master restarts.
CREATE TABLE node_service (
    name           TEXT PRIMARY KEY,
    mode           TEXT NOT NULL,                          -- 'CORDONED' or 'DRAINING'
    drain_deadline REAL,                                   -- DRAINING: jobs preempted from then on
    updated_at     REAL NOT NULL
);

-- GPUs the master quarantined after an Xid or ECC error, and those an admin released.
CREATE TABLE gpu_health (
    uuid       TEXT PRIMARY KEY,
    node       TEXT NOT NULL,
    quarantine TEXT NOT NULL DEFAULT '',                   -- why; '' = released
    ecc_seen   INTEGER NOT NULL DEFAULT 0,                 -- ECC count at the last change: only more quarantines again
    updated_at REAL NOT NULL
);
