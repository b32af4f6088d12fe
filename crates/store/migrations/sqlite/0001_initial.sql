-- toolgate-store schema 1 (SQLite): the hash-chained audit log, tool pins with their quarantine, approvals.
-- Times are RFC 3339 UTC text with microseconds (fixed width, so text order is time order) or, where SQL compares
-- them, integer microseconds since the Unix epoch.

CREATE TABLE audit_log (
    seq          INTEGER PRIMARY KEY,
    time         TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    caller       TEXT,
    session      TEXT,
    upstream     TEXT,
    tool         TEXT,
    verdict      TEXT,
    reasons      TEXT,
    hint_sources TEXT,
    approval_id  TEXT,
    duration_us  INTEGER,
    outcome      TEXT,
    args_digest  TEXT,
    args         TEXT,
    detail       TEXT,
    prev_hash    TEXT    NOT NULL,
    hash         TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_tool ON audit_log (tool);

-- The chain's head, moved in the same transaction as every append: a row removed from (or added to) the end of the
-- log outside the store no longer matches it.
CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT    NOT NULL
) STRICT;

CREATE TABLE pins (
    upstream        TEXT NOT NULL,
    tool            TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    field_digests   TEXT NOT NULL,
    definition      TEXT NOT NULL,
    effective_hints TEXT NOT NULL,
    approved_at     TEXT NOT NULL,
    approved_by     TEXT NOT NULL,
    PRIMARY KEY (upstream, tool)
) STRICT;

-- At most one definition waiting per tool: a newer change replaces an older one still waiting.
CREATE TABLE pin_changes (
    upstream           TEXT NOT NULL,
    tool               TEXT NOT NULL,
    pinned_fingerprint TEXT NOT NULL,
    fingerprint        TEXT NOT NULL,
    field_digests      TEXT NOT NULL,
    definition         TEXT NOT NULL,
    effective_hints    TEXT NOT NULL,
    changes            TEXT NOT NULL,
    detected_at        TEXT NOT NULL,
    PRIMARY KEY (upstream, tool)
) STRICT;

CREATE TABLE approvals (
    id               TEXT    PRIMARY KEY,
    session          TEXT    NOT NULL,
    upstream         TEXT    NOT NULL,
    tool             TEXT    NOT NULL,
    title            TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    args_summary     TEXT    NOT NULL,
    tool_fingerprint TEXT    NOT NULL,
    args_digest      TEXT    NOT NULL,
    created_us       INTEGER NOT NULL,
    expires_us       INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'consumed')),
    decided_by       TEXT,
    decided_us       INTEGER,
    consumed_us      INTEGER
) STRICT;

CREATE INDEX approvals_state ON approvals (state, expires_us);
