-- Verification records written by `toolgate verify`: what a tool was seen doing in the observing sandbox, bound to
-- the fingerprint of its definition (the one the gateway pins) and the server command it ran under. `serve` reads
-- the newest record per (command, fingerprint) as evidence for the trust rule.
CREATE TABLE verification (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    command TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    verified_at TEXT NOT NULL,
    calls INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    wrote INTEGER NOT NULL,
    connected INTEGER NOT NULL,
    repeat_changed INTEGER NOT NULL,
    destroyed INTEGER NOT NULL,
    supported INTEGER NOT NULL,
    evidence TEXT NOT NULL
);
CREATE INDEX verification_by_command ON verification (command, fingerprint, id);
