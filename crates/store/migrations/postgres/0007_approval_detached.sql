-- An approval no call waits on in any process (SQLite's migration 17): a URL-mode confirmation's, which the
-- client's retry reads from whichever process it reaches; lapsed at its expiry, never because a process stopped.
ALTER TABLE approvals ADD COLUMN detached BOOLEAN NOT NULL DEFAULT FALSE;
