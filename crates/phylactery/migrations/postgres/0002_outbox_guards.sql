-- Phylactery ledger, version 2, PostgreSQL dialect.
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
    created_at BIGINT NOT NULL,
    submitting_at BIGINT,
    updated_at BIGINT NOT NULL,
    CHECK (state IN ('OUTBOX', 'ABANDONED_BEFORE_SUBMIT') OR submitting_at IS NOT NULL)
);

-- The Intercom task machine: committed (OUTBOX) before any byte, SUBMITTING before the first
-- byte, then parked or settled; an uncertain initial send is never resent, only reconciled.
CREATE FUNCTION intercom_task_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (
        (OLD.state = 'OUTBOX' AND NEW.state IN ('SUBMITTING', 'ABANDONED_BEFORE_SUBMIT'))
        OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('PARKED', 'UNCERTAIN', 'SUCCEEDED', 'REFUSED',
            'FAILED', 'CANCELLED', 'EXPIRED', 'REVOKED'))
        OR (OLD.state = 'PARKED' AND NEW.state IN ('SUCCEEDED', 'REFUSED', 'FAILED', 'CANCELLED',
            'EXPIRED', 'REVOKED', 'LOST'))
        OR (OLD.state = 'UNCERTAIN' AND NEW.state IN ('PARKED', 'SUCCEEDED', 'REFUSED', 'FAILED',
            'CANCELLED', 'EXPIRED', 'REVOKED', 'LOST'))
    ) THEN
        RAISE EXCEPTION 'intercom/invalid-transition';
    END IF;
    IF NEW.task_id IS DISTINCT FROM OLD.task_id OR NEW.attempt_id IS DISTINCT FROM OLD.attempt_id
        OR NEW.decision_id IS DISTINCT FROM OLD.decision_id OR NEW.peer IS DISTINCT FROM OLD.peer
        OR NEW.message_id IS DISTINCT FROM OLD.message_id
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER intercom_task_transition BEFORE UPDATE ON intercom_task
FOR EACH ROW EXECUTE FUNCTION intercom_task_transition_fn();

-- An admission is a reservation: once committed, no column of it ever changes.
CREATE FUNCTION discord_event_admission_immutable_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'admission/immutable';
END;
$$;
CREATE TRIGGER discord_event_admission_immutable BEFORE UPDATE ON discord_event_admission
FOR EACH ROW EXECUTE FUNCTION discord_event_admission_immutable_fn();

-- What an intent sends (turn, sequence, effect, digest, nonce) is fixed when it is committed.
CREATE FUNCTION discord_delivery_intent_identity_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.intent_id IS DISTINCT FROM OLD.intent_id OR NEW.turn_id IS DISTINCT FROM OLD.turn_id
        OR NEW.seq IS DISTINCT FROM OLD.seq OR NEW.effect IS DISTINCT FROM OLD.effect
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
        OR NEW.nonce IS DISTINCT FROM OLD.nonce OR NEW.supersedes IS DISTINCT FROM OLD.supersedes THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER discord_delivery_intent_identity BEFORE UPDATE ON discord_delivery_intent
FOR EACH ROW EXECUTE FUNCTION discord_delivery_intent_identity_fn();

-- A delivery record changes only when evidence settles an UNKNOWN outcome.
CREATE FUNCTION reach_delivery_settled_once_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (OLD.outcome = 'UNKNOWN' AND NEW.outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED'))
        OR NEW.effect IS DISTINCT FROM OLD.effect
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
        OR NEW.nonce IS DISTINCT FROM OLD.nonce
        OR NEW.claim_generation IS DISTINCT FROM OLD.claim_generation THEN
        RAISE EXCEPTION 'delivery/already-settled';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER reach_delivery_settled_once BEFORE UPDATE ON reach_delivery
FOR EACH ROW EXECUTE FUNCTION reach_delivery_settled_once_fn();

CREATE FUNCTION ledger_append_only_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger/append-only';
END;
$$;
CREATE TRIGGER no_delete_admission BEFORE DELETE OR TRUNCATE ON discord_event_admission
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_turn BEFORE DELETE OR TRUNCATE ON reach_turn
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_intent BEFORE DELETE OR TRUNCATE ON discord_delivery_intent
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_delivery BEFORE DELETE OR TRUNCATE ON reach_delivery
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_attempt BEFORE DELETE OR TRUNCATE ON service_job_attempt
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_intercom_task BEFORE DELETE OR TRUNCATE ON intercom_task
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();

-- The commit sequence: advanced by every statement that moves the chain forward. A sequence,
-- not a counter row, so concurrent writers never queue on one hot row; a vault restored from an
-- older copy (dump or snapshot) carries its older sequence value.
CREATE SEQUENCE vault_commit_seq;
CREATE FUNCTION vault_commit_seq_bump_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('vault_commit_seq');
    RETURN NULL;
END;
$$;
CREATE TRIGGER seq_admission AFTER INSERT ON discord_event_admission
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_turn AFTER UPDATE ON reach_turn
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_intent AFTER INSERT OR UPDATE ON discord_delivery_intent
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_attempt AFTER INSERT OR UPDATE ON service_job_attempt
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_intercom AFTER UPDATE ON intercom_task
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();

-- A detected rollback: the vault was older than the high-water mark (or another vault). It
-- refuses to serve until an operator reconciliation resolves it.
CREATE TABLE vault_rollback (
    rollback_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    detected_at BIGINT NOT NULL,
    vault_seq BIGINT NOT NULL,
    mark_vault_id TEXT NOT NULL,
    mark_seq BIGINT NOT NULL,
    reconciliation_id BIGINT REFERENCES operator_reconciliation (reconciliation_id)
);

-- Service compromise: a taint names a principal and a reason; each in-flight record it touched
-- is listed with what was done to it. A flag and a record, never a state that could be resent.
CREATE TABLE taint_mark (
    taint_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    principal TEXT NOT NULL CHECK (length(principal) >= 1),
    reason TEXT NOT NULL CHECK (length(reason) >= 1),
    recorded_by TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);
CREATE TABLE tainted_record (
    taint_id BIGINT NOT NULL REFERENCES taint_mark (taint_id),
    record TEXT NOT NULL CHECK (record IN ('DiscordDeliveryIntent@1', 'ServiceJobAttempt@1', 'IntercomTask')),
    record_id TEXT NOT NULL,
    state_at_taint TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('LEASE_REVOKED', 'OUTCOME_UNKNOWN', 'OUTCOME_INDETERMINATE',
        'ABANDONED_BEFORE_SUBMIT', 'REVOKED', 'FLAGGED')),
    PRIMARY KEY (taint_id, record, record_id)
);
CREATE INDEX tainted_by_record ON tainted_record (record_id);
CREATE INDEX intent_by_lease_owner ON discord_delivery_intent (lease_owner) WHERE lease_owner IS NOT NULL;
