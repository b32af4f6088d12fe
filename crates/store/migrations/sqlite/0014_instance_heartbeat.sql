-- When each gateway process sharing the store was last seen alive (microseconds since the epoch). A process's
-- inventory counts in the merged view, and its waiting approvals stay decidable, only while its row is fresh.
CREATE TABLE instance_heartbeats (
    instance TEXT    PRIMARY KEY,
    seen_us  INTEGER NOT NULL
) STRICT;
