-- The rack (switch) each node sits in, from horus-worker --rack (issue 11); '' = not given.
ALTER TABLE nodes ADD COLUMN rack TEXT NOT NULL DEFAULT '';
