-- Pins for every kind of definition a pinned upstream publishes, not only tools: prompts, resources, resource
-- templates and the server's instructions. `kind` joins the key (a prompt and a tool may share a name); `tool` keeps
-- its column name and holds the item's name at the upstream (a prompt's name, a resource's URI, a template's
-- `uriTemplate`, `instructions`). Rows written before are tools. SQLite cannot change a primary key in place, so
-- both tables are rebuilt and their rows copied.
CREATE TABLE pins_by_kind (
    upstream        TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'tool',
    tool            TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    field_digests   TEXT NOT NULL,
    definition      TEXT NOT NULL,
    effective_hints TEXT NOT NULL,
    approved_at     TEXT NOT NULL,
    approved_by     TEXT NOT NULL,
    PRIMARY KEY (upstream, kind, tool)
) STRICT;
INSERT INTO pins_by_kind (upstream, kind, tool, fingerprint, field_digests, definition, effective_hints, approved_at,
                          approved_by)
    SELECT upstream, 'tool', tool, fingerprint, field_digests, definition, effective_hints, approved_at, approved_by
    FROM pins;
DROP TABLE pins;
ALTER TABLE pins_by_kind RENAME TO pins;

CREATE TABLE pin_changes_by_kind (
    upstream           TEXT NOT NULL,
    kind               TEXT NOT NULL DEFAULT 'tool',
    tool               TEXT NOT NULL,
    pinned_fingerprint TEXT NOT NULL,
    fingerprint        TEXT NOT NULL,
    field_digests      TEXT NOT NULL,
    definition         TEXT NOT NULL,
    effective_hints    TEXT NOT NULL,
    changes            TEXT NOT NULL,
    detected_at        TEXT NOT NULL,
    PRIMARY KEY (upstream, kind, tool)
) STRICT;
INSERT INTO pin_changes_by_kind (upstream, kind, tool, pinned_fingerprint, fingerprint, field_digests, definition,
                                 effective_hints, changes, detected_at)
    SELECT upstream, 'tool', tool, pinned_fingerprint, fingerprint, field_digests, definition, effective_hints,
           changes, detected_at
    FROM pin_changes;
DROP TABLE pin_changes;
ALTER TABLE pin_changes_by_kind RENAME TO pin_changes;
