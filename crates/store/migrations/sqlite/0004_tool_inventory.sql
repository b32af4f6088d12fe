-- Every tool each upstream lists, as the gateway last saw it: what the console's tools page shows without asking the
-- relay. Replaced per upstream in one transaction whenever the gateway's catalog is rebuilt; an upstream that is down
-- keeps the rows of its last listing (updated_at says when).
CREATE TABLE tool_inventory (
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
    PRIMARY KEY (upstream, tool)
) STRICT;
