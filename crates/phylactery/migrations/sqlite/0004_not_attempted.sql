-- Phylactery ledger, version 4, SQLite dialect: the NOT_ATTEMPTED delivery outcome.
-- ReachDelivery@1 returns NOT_ATTEMPTED, KNOWN_SENT, KNOWN_REJECTED or UNKNOWN (seed 001). A
-- claimed intent whose EgressDecision ward will never issue (the task's Sigil expired or was
-- revoked, a task budget is spent) is settled NOT_ATTEMPTED under its claim generation: no byte
-- was sent, and it is never claimed again.
--
-- SQLite cannot alter a CHECK constraint, so both tables are rebuilt as
-- https://sqlite.org/lang_altertable.html#otheralter describes (new table, copy, drop, rename,
-- then indexes and triggers again). The runner turns foreign keys off around this migration,
-- runs `PRAGMA foreign_key_check` before its commit, and renames with `legacy_alter_table` on,
-- so views and triggers elsewhere keep naming the tables as they did.

CREATE TABLE discord_delivery_intent_v4 (
    intent_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL REFERENCES reach_turn (turn_id),
    seq INTEGER NOT NULL CHECK (seq >= 1),
    supersedes TEXT REFERENCES discord_delivery_intent (intent_id),
    effect TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE CHECK (length(nonce) BETWEEN 1 AND 25),
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'CLAIMED', 'SUBMITTING', 'KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN', 'NOT_ATTEMPTED')),
    generation INTEGER NOT NULL CHECK (generation >= 0),
    lease_owner TEXT,
    lease_expires_at INTEGER,
    created_at INTEGER NOT NULL,
    submitting_at INTEGER,
    settled_at INTEGER,
    UNIQUE (turn_id, seq),
    CHECK ((state = 'PENDING') = (generation = 0)),
    CHECK (state = 'PENDING' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state IN ('PENDING', 'CLAIMED', 'NOT_ATTEMPTED') OR submitting_at IS NOT NULL),
    CHECK (state <> 'NOT_ATTEMPTED' OR submitting_at IS NULL)
);
INSERT INTO discord_delivery_intent_v4 (intent_id, turn_id, seq, supersedes, effect,
    payload_digest, nonce, state, generation, lease_owner, lease_expires_at, created_at,
    submitting_at, settled_at)
SELECT intent_id, turn_id, seq, supersedes, effect, payload_digest, nonce, state, generation,
    lease_owner, lease_expires_at, created_at, submitting_at, settled_at
FROM discord_delivery_intent;
DROP TABLE discord_delivery_intent;
ALTER TABLE discord_delivery_intent_v4 RENAME TO discord_delivery_intent;

CREATE TABLE reach_delivery_v4 (
    intent_id TEXT PRIMARY KEY REFERENCES discord_delivery_intent (intent_id),
    outcome TEXT NOT NULL CHECK (outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN', 'NOT_ATTEMPTED')),
    effect TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    nonce TEXT NOT NULL,
    claim_generation INTEGER NOT NULL CHECK (claim_generation >= 1),
    platform_status INTEGER,
    message_id TEXT,
    detail TEXT,
    settled_at INTEGER NOT NULL,
    reconciled_at INTEGER,
    CHECK (outcome <> 'KNOWN_SENT' OR message_id IS NOT NULL),
    CHECK (outcome <> 'NOT_ATTEMPTED' OR (message_id IS NULL AND platform_status IS NULL AND detail IS NOT NULL))
);
INSERT INTO reach_delivery_v4 (intent_id, outcome, effect, payload_digest, nonce,
    claim_generation, platform_status, message_id, detail, settled_at, reconciled_at)
SELECT intent_id, outcome, effect, payload_digest, nonce, claim_generation, platform_status,
    message_id, detail, settled_at, reconciled_at
FROM reach_delivery;
DROP TABLE reach_delivery;
ALTER TABLE reach_delivery_v4 RENAME TO reach_delivery;

-- What the drops took with them, as versions 1-3 made it, with NOT_ATTEMPTED added.
CREATE INDEX intent_by_state ON discord_delivery_intent (state, lease_expires_at);
CREATE INDEX intent_by_lease_owner ON discord_delivery_intent (lease_owner) WHERE lease_owner IS NOT NULL;

-- The fence in the database: a send can only be handed out before SUBMITTING, generations never
-- go back, a claim that can never be sent ends NOT_ATTEMPTED under its own generation, and a
-- settled intent never changes again.
CREATE TRIGGER discord_delivery_intent_transition BEFORE UPDATE ON discord_delivery_intent
WHEN NEW.generation < OLD.generation OR NOT (
    (OLD.state = 'PENDING' AND NEW.state = 'CLAIMED')
    OR (OLD.state = 'CLAIMED' AND NEW.state IN ('CLAIMED', 'SUBMITTING'))
    OR (OLD.state = 'CLAIMED' AND NEW.state = 'NOT_ATTEMPTED' AND NEW.generation = OLD.generation)
    OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN') AND NEW.generation = OLD.generation)
    OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED') AND NEW.generation = OLD.generation)
)
BEGIN
    SELECT RAISE(ABORT, 'intent/invalid-transition');
END;

CREATE TRIGGER discord_delivery_intent_identity BEFORE UPDATE ON discord_delivery_intent
WHEN NEW.intent_id IS NOT OLD.intent_id OR NEW.turn_id IS NOT OLD.turn_id OR NEW.seq IS NOT OLD.seq
    OR NEW.effect IS NOT OLD.effect OR NEW.payload_digest IS NOT OLD.payload_digest
    OR NEW.nonce IS NOT OLD.nonce OR NEW.supersedes IS NOT OLD.supersedes
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

CREATE TRIGGER reach_delivery_settled_once BEFORE UPDATE ON reach_delivery
WHEN NOT (OLD.outcome = 'UNKNOWN' AND NEW.outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED'))
    OR NEW.effect IS NOT OLD.effect OR NEW.payload_digest IS NOT OLD.payload_digest
    OR NEW.nonce IS NOT OLD.nonce OR NEW.claim_generation IS NOT OLD.claim_generation
BEGIN
    SELECT RAISE(ABORT, 'delivery/already-settled');
END;

CREATE TRIGGER no_delete_intent BEFORE DELETE ON discord_delivery_intent
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_delivery BEFORE DELETE ON reach_delivery
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER seq_intent_insert AFTER INSERT ON discord_delivery_intent
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_intent_update AFTER UPDATE ON discord_delivery_intent
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;

-- A ReachDelivery@1 settles its intent in the same statement: from SUBMITTING under the
-- generation fence, or, for NOT_ATTEMPTED, from CLAIMED under the claim's generation. Recovery
-- and taint insert theirs after moving the intent to UNKNOWN themselves, when this matches nothing.
CREATE TRIGGER delivery_settles_intent AFTER INSERT ON reach_delivery
BEGIN
    UPDATE discord_delivery_intent SET state = NEW.outcome, settled_at = NEW.settled_at
    WHERE intent_id = NEW.intent_id AND generation = NEW.claim_generation
        AND state = CASE WHEN NEW.outcome = 'NOT_ATTEMPTED' THEN 'CLAIMED' ELSE 'SUBMITTING' END;
END;
