-- Step grants: ward's single-use permission for one stamped plan step of one experiment on one
-- instance under one pack generation (`src/grant.rs`). The token's tag is not stored: ward
-- recomputes it from this row, so an edited row redeems nothing. Ids and digests only; no
-- step bytes.

CREATE TABLE step_grant (
    id TEXT PRIMARY KEY,
    experiment_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    plan_digest TEXT NOT NULL,
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    step_digest TEXT NOT NULL,
    pack_name TEXT NOT NULL,
    pack_generation INTEGER NOT NULL CHECK (pack_generation >= 0),
    effect_class TEXT NOT NULL CHECK (effect_class IN ('observation', 'contained-mutation')),
    minted_by TEXT NOT NULL,
    minted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    -- Set once, by the one UPDATE that redeems (`... WHERE redeemed_at IS NULL`).
    redeemed_at INTEGER,
    redeemed_by TEXT CHECK ((redeemed_at IS NULL) = (redeemed_by IS NULL)),
    -- Set when a later ward process opened the store before the grant was redeemed.
    voided_at INTEGER
) STRICT;

CREATE INDEX step_grant_expiry ON step_grant (expires_at);
CREATE INDEX step_grant_pack ON step_grant (pack_name, pack_generation) WHERE redeemed_at IS NULL;

-- The current generation of each pack core has fenced. Only ever raised.
CREATE TABLE pack_fence (
    pack_name TEXT PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    fenced_at INTEGER NOT NULL,
    fenced_by TEXT NOT NULL
) STRICT;
