-- 0013 (issue 31, docs/sharing.md): GPU memory per job. The current/last attempt's cap per GPU
-- (0: none), the peak per GPU the worker measured for the last attempt that ended (0: unknown),
-- and, when > 0, the cap the job runs alone with since an attempt went over its memory while
-- sharing (its spec then reads exclusive with that gpu_memory_mib).
ALTER TABLE jobs ADD COLUMN gpu_memory_cap_mib INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN gpu_memory_peak_mib INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN contained_mib INTEGER NOT NULL DEFAULT 0;
