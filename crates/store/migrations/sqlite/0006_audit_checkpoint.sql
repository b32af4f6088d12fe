-- Retention: the anchor of a pruned audit log. The seq and hash of the last pruned row (the next row's prev_hash),
-- so `verify` starts there; one row, moved in the same transaction that deletes a pruned segment.
CREATE TABLE audit_checkpoint (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    seq         INTEGER NOT NULL,
    hash        TEXT    NOT NULL,
    time        TEXT    NOT NULL,
    pruned_at   TEXT    NOT NULL,
    rows_pruned INTEGER NOT NULL
) STRICT;
