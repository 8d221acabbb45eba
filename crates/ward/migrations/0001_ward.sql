-- Ward's own store. Holds no raw subject id and no payload: scopes appear only as keyed-hash
-- ids, rate limits only as counters per window, payloads only as digests.

CREATE TABLE sigil (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    scope_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
    revoked_at INTEGER,
    revoked_by TEXT,
    budget_concurrency INTEGER NOT NULL,
    budget_tokens INTEGER NOT NULL,
    budget_retries INTEGER NOT NULL,
    budget_spend_micros INTEGER NOT NULL,
    used_tokens INTEGER NOT NULL DEFAULT 0,
    used_retries INTEGER NOT NULL DEFAULT 0,
    used_spend_micros INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX sigil_expiry ON sigil (expires_at);

CREATE TABLE decision (
    id TEXT PRIMARY KEY,
    sigil_id TEXT NOT NULL REFERENCES sigil (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    purpose TEXT NOT NULL,
    redeemer TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    labels TEXT NOT NULL,
    policy_revision TEXT NOT NULL,
    cut_receipt_digest TEXT,
    issuer TEXT NOT NULL,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    max_tokens INTEGER NOT NULL,
    max_spend_micros INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('issued', 'redeemed', 'revoked', 'void')),
    redeemed_at INTEGER,
    redeemed_by TEXT
) STRICT;

CREATE INDEX decision_live ON decision (sigil_id, expires_at);

CREATE TABLE rate_window (
    dimension TEXT NOT NULL,
    counter_key TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (dimension, counter_key, window_start)
) STRICT, WITHOUT ROWID;

CREATE INDEX rate_window_age ON rate_window (window_start);
