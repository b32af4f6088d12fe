-- Sealed request states of 2026-07-28 confirmations (MRTR): the secret every gateway process sharing this database
-- seals and opens them with (so a retry may reach any of them), and the nonces already used (so a state opens for
-- one retry only, whichever process it reaches). A used nonce is kept until its state expires, then pruned.
CREATE TABLE sealing_keys (
    purpose TEXT PRIMARY KEY,
    secret BLOB NOT NULL,
    created_us INTEGER NOT NULL
);
CREATE TABLE used_request_states (
    nonce TEXT PRIMARY KEY,
    expires_us INTEGER NOT NULL
);
