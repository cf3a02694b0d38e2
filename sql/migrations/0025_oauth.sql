-- OAuth 2.1 authorization server state (pgrag/http/oauth): registered clients, pending
-- authorization requests, grants (one per consent: the "family" every code and token of
-- that consent belongs to, revoked as a whole), codes and tokens. Codes, tokens and request
-- ids are stored as SHA-256 hashes only. None of these tables is granted to pgrag_scoped.

CREATE TABLE pgrag.oauth_clients (
    client_id  text PRIMARY KEY,
    info       jsonb NOT NULL,  -- the registered metadata (RFC 7591)
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgrag.oauth_requests (
    id_hash    text PRIMARY KEY,
    client_id  text NOT NULL REFERENCES pgrag.oauth_clients ON DELETE CASCADE,
    params     jsonb NOT NULL,  -- the validated authorization request
    expires_at timestamptz NOT NULL
);

CREATE TABLE pgrag.oauth_grants (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id   text NOT NULL REFERENCES pgrag.oauth_clients ON DELETE CASCADE,
    owner       text NOT NULL,  -- the audit name of who consented
    scopes      text[] NOT NULL,
    collections text[],         -- NULL: every collection
    resource    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE pgrag.oauth_codes (
    code_hash          text PRIMARY KEY,
    grant_id           bigint NOT NULL REFERENCES pgrag.oauth_grants ON DELETE CASCADE,
    code_challenge     text NOT NULL,
    redirect_uri       text NOT NULL,
    redirect_explicit  boolean NOT NULL,
    expires_at         timestamptz NOT NULL,
    used_at            timestamptz
);

CREATE TABLE pgrag.oauth_tokens (
    token_hash text PRIMARY KEY,
    grant_id   bigint NOT NULL REFERENCES pgrag.oauth_grants ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,  -- a refresh token once rotated: presenting it again revokes the grant
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_tokens_grant ON pgrag.oauth_tokens (grant_id);
CREATE INDEX oauth_codes_grant ON pgrag.oauth_codes (grant_id);
