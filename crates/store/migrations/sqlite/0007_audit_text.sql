-- A leaner audit row: a decision's reasons and the effective hints with their sources are the same text for every
-- call of one tool under one policy, and were half of each row (481 and 209 of about 1,000 bytes). They are stored
-- once here and referred to by id; the row's own column stays NULL. Reading a row puts the text back, so the chain
-- hashes, `verify` and every query see the same columns as before. Rows written before this migration keep their
-- text in place.
CREATE TABLE audit_text (
    id   INTEGER PRIMARY KEY,
    text TEXT    NOT NULL UNIQUE
) STRICT;
ALTER TABLE audit_log ADD COLUMN reasons_ref INTEGER REFERENCES audit_text (id);
ALTER TABLE audit_log ADD COLUMN hint_sources_ref INTEGER REFERENCES audit_text (id);
