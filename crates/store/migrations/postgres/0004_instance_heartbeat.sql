-- When each gateway process sharing the store was last seen alive (SQLite's migration 14).
CREATE TABLE instance_heartbeats (
    instance TEXT   PRIMARY KEY,
    seen_us  BIGINT NOT NULL
);
