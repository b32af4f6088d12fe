-- The identity of the caller whose call waits (its audit row's caller.identity), so the console can refuse a person
-- approving their own call. NULL for approvals queued before this migration: those are never taken for anyone's own.
ALTER TABLE approvals ADD COLUMN caller TEXT;
