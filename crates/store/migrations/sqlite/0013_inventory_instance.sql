-- Each gateway process's own view of the inventory: `instance` joins the key, so processes sharing a store keep
-- their listings side by side (a merged view is read from them). Rows written before belong to no instance ('').
-- SQLite cannot change a primary key in place, so the table is rebuilt and its rows copied.
CREATE TABLE tool_inventory_by_instance (
    upstream      TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    position      INTEGER NOT NULL,
    exposed_name  TEXT    NOT NULL,
    title         TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('visible', 'quarantined', 'hidden')),
    state_reason  TEXT,
    hints         TEXT    NOT NULL,
    annotations   TEXT    NOT NULL,
    risk_level    INTEGER NOT NULL CHECK (risk_level BETWEEN 0 AND 4),
    risk_category TEXT    NOT NULL,
    findings      TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL,
    access        TEXT    NOT NULL DEFAULT '[]',
    instance      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (upstream, tool, instance)
) STRICT;
INSERT INTO tool_inventory_by_instance (upstream, tool, position, exposed_name, title, state, state_reason, hints,
                                        annotations, risk_level, risk_category, findings, fingerprint, updated_at,
                                        access, instance)
    SELECT upstream, tool, position, exposed_name, title, state, state_reason, hints, annotations, risk_level,
           risk_category, findings, fingerprint, updated_at, access, ''
    FROM tool_inventory;
DROP TABLE tool_inventory;
ALTER TABLE tool_inventory_by_instance RENAME TO tool_inventory;
