-- Rows that reached the audit journal before the database: the journal id of each, so recovery after a crash
-- appends a journaled row once and only once. Kept apart from audit_log so the hashed row content is unchanged.
CREATE TABLE audit_journal_ids (
    journal_id TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL
);
