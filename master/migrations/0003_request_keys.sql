-- 0003: request ids are per user. The stored key becomes owner || char(31) || request_id, so the
-- same request id from two users makes two jobs (master.store.jobs.request_key).
-- Migrations are append-only: never edit a released file, add 0004_*.sql.

UPDATE jobs SET request_id = owner || char(31) || request_id
WHERE request_id IS NOT NULL AND instr(request_id, char(31)) = 0;
