-- Sealed request states of 2026-07-28 confirmations (MRTR), as SQLite's migration 11: the secret every gateway
-- process sharing this database seals and opens them with (so a retry may reach any of them), and the nonces already
-- used (so a state opens for one retry only, whichever process it reaches), kept until their state expires.
CREATE TABLE sealing_keys (
    purpose    TEXT PRIMARY KEY,
    secret     BYTEA NOT NULL,
    created_us BIGINT NOT NULL
);
CREATE TABLE used_request_states (
    nonce      TEXT PRIMARY KEY,
    expires_us BIGINT NOT NULL
);
