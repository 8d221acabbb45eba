-- Human approval (HIL) and the pack's whole current-use standing (`src/hil.rs`,
-- `src/grant.rs`).

-- One request per step of one experiment's plan. What it shows is stored as filed (core forms
-- it from the stamped plan: ids, digests, the class and its source, the diff, target or argv,
-- the rollback); `digest` is over all of it, and an answer must name it. The answer is
-- written once, by the one UPDATE `... WHERE state = 'pending' AND expires_at > now`.
CREATE TABLE hil_request (
    id TEXT PRIMARY KEY,
    -- Filing order, for watchers.
    seq INTEGER NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    experiment_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    plan_digest TEXT NOT NULL,
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    step_digest TEXT NOT NULL,
    pack_name TEXT NOT NULL,
    pack_generation INTEGER NOT NULL CHECK (pack_generation >= 0),
    effect_class TEXT NOT NULL CHECK (effect_class IN ('observation', 'contained-mutation')),
    class_source TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('run', 'patch', 'restart', 'verify')),
    target TEXT NOT NULL,
    argv TEXT NOT NULL,
    diff TEXT NOT NULL,
    rollback TEXT NOT NULL,
    filed_by TEXT NOT NULL,
    filed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL CHECK (expires_at > filed_at),
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'denied')),
    answered_at INTEGER,
    answered_by TEXT,
    reason TEXT NOT NULL DEFAULT '',
    CHECK ((state = 'pending') = (answered_at IS NULL)),
    CHECK ((answered_at IS NULL) = (answered_by IS NULL)),
    UNIQUE (experiment_id, plan_digest, step_index)
) STRICT;

CREATE INDEX hil_request_pending ON hil_request (seq) WHERE state = 'pending';

-- An answer is final: once answered, a request's state never changes again.
CREATE TRIGGER hil_request_answer_once BEFORE UPDATE OF state, answered_at, answered_by, reason
    ON hil_request WHEN OLD.state <> 'pending'
BEGIN
    SELECT RAISE(ABORT, 'hil: an answered request is final');
END;

-- The fence now holds what core's ledger says of the pack's current use, not only its
-- generation. `epoch` is bumped by every change of the standing; a step grant redeems only
-- under the epoch it was minted in, so a pause and resume between mint and redemption still
-- stops the step.
ALTER TABLE pack_fence ADD COLUMN revoked INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1));
ALTER TABLE pack_fence ADD COLUMN paused INTEGER NOT NULL DEFAULT 1 CHECK (paused IN (0, 1));
ALTER TABLE pack_fence ADD COLUMN bound_profile_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE pack_fence ADD COLUMN active_profile_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE pack_fence ADD COLUMN hil TEXT NOT NULL DEFAULT 'each-step'
    CHECK (hil IN ('each-step', 'each-mutation'));
ALTER TABLE pack_fence ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0);

-- What a grant was minted under, beside what it was minted for.
ALTER TABLE step_grant ADD COLUMN profile_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE step_grant ADD COLUMN fence_epoch INTEGER NOT NULL DEFAULT -1;
-- The approved request the grant spends, when the step needed one.
ALTER TABLE step_grant ADD COLUMN hil_request_id TEXT REFERENCES hil_request (id);
