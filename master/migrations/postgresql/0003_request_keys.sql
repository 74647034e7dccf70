-- 0003 for PostgreSQL (see ../0003_request_keys.sql): chr and strpos for char and instr.

UPDATE jobs SET request_id = owner || chr(31) || request_id
WHERE request_id IS NOT NULL AND strpos(request_id, chr(31)) = 0;
