-- An approval no call waits on in any process: a 2026-07-28 request confirmed in URL mode (the console's page) is
-- answered at once, and its client retries the call later, perhaps on another process sharing the store. Such an
-- approval is never lapsed because its queuing process stopped or restarted (nothing of it lives there); it lapses
-- at its expiry. 0 for every approval queued before this migration: each of those had a waiting call.
ALTER TABLE approvals ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
