-- The ID tokens of the console's single sign-on sessions, by session id, until the session expires: the logout's
-- `id_token_hint`, whichever gateway process sharing this database the person logs out on (the session cookie is
-- accepted by all of them). Removed at logout; pruned past their expiry.
CREATE TABLE console_id_tokens (
    session TEXT PRIMARY KEY,
    id_token TEXT NOT NULL,
    expires_us INTEGER NOT NULL
);
