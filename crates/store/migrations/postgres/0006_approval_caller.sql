-- The identity of the caller whose call waits (SQLite's migration 16).
ALTER TABLE approvals ADD COLUMN caller TEXT;
