-- The ID tokens of the console's single sign-on sessions, as SQLite's migration 18: by session id until the session
-- expires, so a logout on any gateway process sharing this database hints the provider with the person's ID token.
CREATE TABLE console_id_tokens (
    session    TEXT PRIMARY KEY,
    id_token   TEXT NOT NULL,
    expires_us BIGINT NOT NULL
);
