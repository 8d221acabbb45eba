-- Phylactery ledger, version 2, SQLite dialect.
-- 1. The Intercom task/outbox record of an A2A attempt, with its checked state machine.
-- 2. Database guards that hold even against raw SQL: committed identities never change and
--    ledger rows are never deleted.
-- 3. The commit sequence behind the vault's high-water mark (rollback detection).
-- 4. Detected vault rollbacks and tainted (service-compromise) marks.

CREATE TABLE intercom_task (
    task_id TEXT PRIMARY KEY,
    attempt_id TEXT NOT NULL UNIQUE REFERENCES service_job_attempt (attempt_id),
    decision_id TEXT NOT NULL REFERENCES egress_decision_ref (decision_id),
    peer TEXT NOT NULL CHECK (length(peer) >= 1),
    message_id TEXT NOT NULL CHECK (length(message_id) >= 1),
    payload_digest TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('OUTBOX', 'SUBMITTING', 'PARKED', 'UNCERTAIN', 'SUCCEEDED',
        'REFUSED', 'FAILED', 'CANCELLED', 'EXPIRED', 'REVOKED', 'LOST', 'ABANDONED_BEFORE_SUBMIT')),
    remote_task_id TEXT,
    evidence TEXT,
    created_at INTEGER NOT NULL,
    submitting_at INTEGER,
    updated_at INTEGER NOT NULL,
    CHECK (state IN ('OUTBOX', 'ABANDONED_BEFORE_SUBMIT') OR submitting_at IS NOT NULL)
);

-- The Intercom task machine: committed (OUTBOX) before any byte, SUBMITTING before the first
-- byte, then parked or settled; an uncertain initial send is never resent, only reconciled.
CREATE TRIGGER intercom_task_transition BEFORE UPDATE ON intercom_task
WHEN NOT (
    (OLD.state = 'OUTBOX' AND NEW.state IN ('SUBMITTING', 'ABANDONED_BEFORE_SUBMIT'))
    OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('PARKED', 'UNCERTAIN', 'SUCCEEDED', 'REFUSED',
        'FAILED', 'CANCELLED', 'EXPIRED', 'REVOKED'))
    OR (OLD.state = 'PARKED' AND NEW.state IN ('SUCCEEDED', 'REFUSED', 'FAILED', 'CANCELLED',
        'EXPIRED', 'REVOKED', 'LOST'))
    OR (OLD.state = 'UNCERTAIN' AND NEW.state IN ('PARKED', 'SUCCEEDED', 'REFUSED', 'FAILED',
        'CANCELLED', 'EXPIRED', 'REVOKED', 'LOST'))
)
BEGIN
    SELECT RAISE(ABORT, 'intercom/invalid-transition');
END;

CREATE TRIGGER intercom_task_identity BEFORE UPDATE ON intercom_task
WHEN NEW.task_id IS NOT OLD.task_id OR NEW.attempt_id IS NOT OLD.attempt_id
    OR NEW.decision_id IS NOT OLD.decision_id OR NEW.peer IS NOT OLD.peer
    OR NEW.message_id IS NOT OLD.message_id OR NEW.payload_digest IS NOT OLD.payload_digest
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

-- An admission is a reservation: once committed, no column of it ever changes.
CREATE TRIGGER discord_event_admission_immutable BEFORE UPDATE ON discord_event_admission
BEGIN
    SELECT RAISE(ABORT, 'admission/immutable');
END;

-- What an intent sends (turn, sequence, effect, digest, nonce) is fixed when it is committed.
CREATE TRIGGER discord_delivery_intent_identity BEFORE UPDATE ON discord_delivery_intent
WHEN NEW.intent_id IS NOT OLD.intent_id OR NEW.turn_id IS NOT OLD.turn_id OR NEW.seq IS NOT OLD.seq
    OR NEW.effect IS NOT OLD.effect OR NEW.payload_digest IS NOT OLD.payload_digest
    OR NEW.nonce IS NOT OLD.nonce OR NEW.supersedes IS NOT OLD.supersedes
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

-- A delivery record changes only when evidence settles an UNKNOWN outcome.
CREATE TRIGGER reach_delivery_settled_once BEFORE UPDATE ON reach_delivery
WHEN NOT (OLD.outcome = 'UNKNOWN' AND NEW.outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED'))
    OR NEW.effect IS NOT OLD.effect OR NEW.payload_digest IS NOT OLD.payload_digest
    OR NEW.nonce IS NOT OLD.nonce OR NEW.claim_generation IS NOT OLD.claim_generation
BEGIN
    SELECT RAISE(ABORT, 'delivery/already-settled');
END;

CREATE TRIGGER no_delete_admission BEFORE DELETE ON discord_event_admission
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_turn BEFORE DELETE ON reach_turn
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_intent BEFORE DELETE ON discord_delivery_intent
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_delivery BEFORE DELETE ON reach_delivery
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_attempt BEFORE DELETE ON service_job_attempt
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_intercom_task BEFORE DELETE ON intercom_task
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;

-- The commit sequence: bumped by every write that moves the chain forward, in the same
-- transaction, so a vault restored from an older copy has a lower sequence than the high-water
-- mark core keeps beside it.
CREATE TABLE vault_commit_seq (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    seq INTEGER NOT NULL CHECK (seq >= 0)
);
INSERT INTO vault_commit_seq (singleton, seq) VALUES (1, 0);
CREATE TRIGGER vault_commit_seq_monotonic BEFORE UPDATE ON vault_commit_seq
WHEN NEW.seq < OLD.seq
BEGIN
    SELECT RAISE(ABORT, 'vault/sequence-regressed');
END;
CREATE TRIGGER seq_admission AFTER INSERT ON discord_event_admission
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_turn AFTER UPDATE ON reach_turn
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_intent_insert AFTER INSERT ON discord_delivery_intent
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_intent_update AFTER UPDATE ON discord_delivery_intent
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_attempt_insert AFTER INSERT ON service_job_attempt
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_attempt_update AFTER UPDATE ON service_job_attempt
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_intercom_update AFTER UPDATE ON intercom_task
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;

-- A detected rollback: the vault was older than the high-water mark (or another vault). It
-- refuses to serve until an operator reconciliation resolves it.
CREATE TABLE vault_rollback (
    rollback_id INTEGER PRIMARY KEY AUTOINCREMENT,
    detected_at INTEGER NOT NULL,
    vault_seq INTEGER NOT NULL,
    mark_vault_id TEXT NOT NULL,
    mark_seq INTEGER NOT NULL,
    reconciliation_id INTEGER REFERENCES operator_reconciliation (reconciliation_id)
);

-- Service compromise: a taint names a principal and a reason; each in-flight record it touched
-- is listed with what was done to it. A flag and a record, never a state that could be resent.
CREATE TABLE taint_mark (
    taint_id INTEGER PRIMARY KEY AUTOINCREMENT,
    principal TEXT NOT NULL CHECK (length(principal) >= 1),
    reason TEXT NOT NULL CHECK (length(reason) >= 1),
    recorded_by TEXT NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE TABLE tainted_record (
    taint_id INTEGER NOT NULL REFERENCES taint_mark (taint_id),
    record TEXT NOT NULL CHECK (record IN ('DiscordDeliveryIntent@1', 'ServiceJobAttempt@1', 'IntercomTask')),
    record_id TEXT NOT NULL,
    state_at_taint TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('LEASE_REVOKED', 'OUTCOME_UNKNOWN', 'OUTCOME_INDETERMINATE',
        'ABANDONED_BEFORE_SUBMIT', 'REVOKED', 'FLAGGED')),
    PRIMARY KEY (taint_id, record, record_id)
);
CREATE INDEX tainted_by_record ON tainted_record (record_id);
CREATE INDEX intent_by_lease_owner ON discord_delivery_intent (lease_owner) WHERE lease_owner IS NOT NULL;
