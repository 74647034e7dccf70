-- 0002: what the interference learner measures from job progress (docs/learning.md).
-- Migrations are append-only: never edit a released file, add 0003_*.sql.

-- Throughput (samples/s from the job's progress helper) of a signature with its GPUs to itself,
-- per GPU type and GPU count: the reference that turns shared throughput into a normalised speed.
CREATE TABLE solo_throughputs (
    job_type      TEXT NOT NULL,                           -- workload signature
    gpu_type      TEXT NOT NULL,
    gpus          INTEGER NOT NULL,
    samples_per_s REAL NOT NULL,                           -- EWMA over measurements
    samples       INTEGER NOT NULL,                        -- measurements folded in
    updated_at    REAL NOT NULL,
    PRIMARY KEY (job_type, gpu_type, gpus)
);

-- Normalised speed of job_type while its GPU(s) were shared with exactly one co_runner signature
-- (its samples/s shared / alone). One row per direction: (a, b) and (b, a) are measured apart.
CREATE TABLE pair_speeds (
    job_type   TEXT NOT NULL,
    co_runner  TEXT NOT NULL,
    gpu_type   TEXT NOT NULL,
    speed      REAL NOT NULL,                              -- EWMA over measurements, in (0, 1]
    samples    INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (job_type, co_runner, gpu_type)
);
