-- Phylactery (Memory Vault) ledger, version 1, PostgreSQL dialect.
-- Every record of the seed's turn chain is a row; foreign keys are its committed edges.
-- State columns carry CHECK constraints and triggers so that a bug in Rust cannot write a
-- transition the state machines forbid.

CREATE TABLE vault_marker (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 1),
    vault_id TEXT NOT NULL,
    epoch BIGINT NOT NULL CHECK (epoch >= 1),
    state TEXT NOT NULL CHECK (state IN ('AWAITING_RECONCILIATION', 'SERVING')),
    created_at BIGINT NOT NULL,
    horizon_ms BIGINT NOT NULL CHECK (horizon_ms >= 0)
);

CREATE TABLE operator_reconciliation (
    reconciliation_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    epoch BIGINT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('GENESIS', 'EFFECTS_RECONCILED', 'HORIZON_ELAPSED')),
    operator TEXT NOT NULL,
    note TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);

CREATE TABLE discord_event_admission (
    admission_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    adapter_revision TEXT NOT NULL,
    application_id TEXT NOT NULL,
    event_kind TEXT NOT NULL,
    external_event_id TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    habitat TEXT NOT NULL,
    admitted_at BIGINT NOT NULL,
    UNIQUE (platform, adapter_revision, application_id, event_kind, external_event_id)
);
CREATE INDEX admission_by_external_event ON discord_event_admission (external_event_id);

CREATE TABLE admission_security_fault (
    fault_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('PAYLOAD_DIGEST_MISMATCH', 'PARTITION_MISMATCH')),
    admission_id TEXT NOT NULL REFERENCES discord_event_admission (admission_id),
    presented_payload_digest TEXT NOT NULL,
    presented_habitat TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);

CREATE TABLE reach_turn (
    turn_id TEXT PRIMARY KEY,
    admission_id TEXT NOT NULL UNIQUE REFERENCES discord_event_admission (admission_id),
    state TEXT NOT NULL CHECK (state IN ('OPEN', 'SUCCEEDED', 'REFUSED', 'DEPENDENCY_UNAVAILABLE', 'EXPIRED', 'FAILED', 'INDETERMINATE')),
    reason TEXT,
    answer_digest TEXT,
    opened_at BIGINT NOT NULL,
    terminal_at BIGINT,
    CHECK ((state = 'OPEN') = (terminal_at IS NULL))
);

CREATE FUNCTION reach_turn_terminal_once_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state <> 'OPEN' THEN
        RAISE EXCEPTION 'turn/already-terminal';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER reach_turn_terminal_once BEFORE UPDATE ON reach_turn
FOR EACH ROW EXECUTE FUNCTION reach_turn_terminal_once_fn();

CREATE TABLE run (
    run_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL UNIQUE REFERENCES reach_turn (turn_id),
    pattern_id TEXT NOT NULL,
    pattern_revision TEXT NOT NULL,
    started_at BIGINT NOT NULL
);

CREATE TABLE public_corpus_snapshot_ref (
    snapshot_digest TEXT PRIMARY KEY,
    corpus_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    first_seen_at BIGINT NOT NULL
);

CREATE TABLE corpus_evidence_bundle_ref (
    run_id TEXT PRIMARY KEY REFERENCES run (run_id),
    bundle_digest TEXT NOT NULL,
    snapshot_digest TEXT NOT NULL REFERENCES public_corpus_snapshot_ref (snapshot_digest),
    passage_count BIGINT NOT NULL CHECK (passage_count >= 0),
    recorded_at BIGINT NOT NULL
);

CREATE TABLE context_lineage (
    run_id TEXT PRIMARY KEY REFERENCES run (run_id),
    lineage_digest TEXT NOT NULL,
    labels TEXT NOT NULL,
    cut_receipt_digest TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);

CREATE TABLE egress_decision_ref (
    decision_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES run (run_id),
    destination TEXT NOT NULL,
    purpose TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL
);

CREATE TABLE service_job_attempt (
    attempt_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES run (run_id),
    attempt_no BIGINT NOT NULL CHECK (attempt_no >= 1),
    channel TEXT NOT NULL CHECK (channel IN ('SERVICE_JOB', 'INTERCOM_TASK')),
    decision_id TEXT NOT NULL UNIQUE REFERENCES egress_decision_ref (decision_id),
    destination TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    protocol_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('PERSISTED', 'SUBMITTING', 'COMPLETED', 'FAILED', 'ABANDONED_BEFORE_SUBMIT', 'INDETERMINATE')),
    response_digest TEXT,
    detail TEXT,
    persisted_at BIGINT NOT NULL,
    submitting_at BIGINT,
    settled_at BIGINT,
    UNIQUE (run_id, attempt_no),
    CHECK (state IN ('PERSISTED', 'ABANDONED_BEFORE_SUBMIT') OR submitting_at IS NOT NULL),
    CHECK (state <> 'COMPLETED' OR response_digest IS NOT NULL)
);
-- At most one attempt per run whose outcome is not proved: a new attempt needs the old one settled.
CREATE UNIQUE INDEX one_unsettled_attempt_per_run ON service_job_attempt (run_id)
    WHERE state IN ('PERSISTED', 'SUBMITTING', 'INDETERMINATE');

CREATE FUNCTION service_job_attempt_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (
    (OLD.state = 'PERSISTED' AND NEW.state IN ('SUBMITTING', 'ABANDONED_BEFORE_SUBMIT'))
    OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('COMPLETED', 'FAILED', 'INDETERMINATE'))
    OR (OLD.state = 'INDETERMINATE' AND NEW.state IN ('COMPLETED', 'FAILED'))
) THEN
        RAISE EXCEPTION 'attempt/invalid-transition';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER service_job_attempt_transition BEFORE UPDATE ON service_job_attempt
FOR EACH ROW EXECUTE FUNCTION service_job_attempt_transition_fn();

CREATE TABLE attempt_reconciliation (
    attempt_id TEXT PRIMARY KEY REFERENCES service_job_attempt (attempt_id),
    outcome TEXT NOT NULL CHECK (outcome IN ('COMPLETED', 'FAILED')),
    evidence TEXT NOT NULL,
    recorded_by TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);

CREATE TABLE discord_delivery_intent (
    intent_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL REFERENCES reach_turn (turn_id),
    seq BIGINT NOT NULL CHECK (seq >= 1),
    supersedes TEXT REFERENCES discord_delivery_intent (intent_id),
    effect TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE CHECK (length(nonce) BETWEEN 1 AND 25),
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'CLAIMED', 'SUBMITTING', 'KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN')),
    generation BIGINT NOT NULL CHECK (generation >= 0),
    lease_owner TEXT,
    lease_expires_at BIGINT,
    created_at BIGINT NOT NULL,
    submitting_at BIGINT,
    settled_at BIGINT,
    UNIQUE (turn_id, seq),
    CHECK ((state = 'PENDING') = (generation = 0)),
    CHECK (state = 'PENDING' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state IN ('PENDING', 'CLAIMED') OR submitting_at IS NOT NULL)
);
CREATE INDEX intent_by_state ON discord_delivery_intent (state, lease_expires_at);

-- The fence in the database: a send can only be handed out before SUBMITTING, generations never
-- go back, and a settled intent never changes again.
CREATE FUNCTION discord_delivery_intent_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.generation < OLD.generation OR NOT (
    (OLD.state = 'PENDING' AND NEW.state = 'CLAIMED')
    OR (OLD.state = 'CLAIMED' AND NEW.state IN ('CLAIMED', 'SUBMITTING'))
    OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN') AND NEW.generation = OLD.generation)
    OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED') AND NEW.generation = OLD.generation)
) THEN
        RAISE EXCEPTION 'intent/invalid-transition';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER discord_delivery_intent_transition BEFORE UPDATE ON discord_delivery_intent
FOR EACH ROW EXECUTE FUNCTION discord_delivery_intent_transition_fn();

CREATE TABLE reach_delivery (
    intent_id TEXT PRIMARY KEY REFERENCES discord_delivery_intent (intent_id),
    outcome TEXT NOT NULL CHECK (outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN')),
    effect TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    nonce TEXT NOT NULL,
    claim_generation BIGINT NOT NULL CHECK (claim_generation >= 1),
    platform_status BIGINT,
    message_id TEXT,
    detail TEXT,
    settled_at BIGINT NOT NULL,
    reconciled_at BIGINT,
    CHECK (outcome <> 'KNOWN_SENT' OR message_id IS NOT NULL)
);

CREATE TABLE delivery_reconciliation (
    intent_id TEXT PRIMARY KEY REFERENCES discord_delivery_intent (intent_id),
    evidence_kind TEXT NOT NULL CHECK (evidence_kind IN ('MESSAGE_FOUND', 'PROVED_ABSENT')),
    message_id TEXT,
    evidence TEXT NOT NULL,
    recorded_by TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    CHECK (evidence_kind <> 'MESSAGE_FOUND' OR message_id IS NOT NULL)
);

-- A bare single-row table used only by the benchmark's baseline insert loop, so the baseline runs
-- on the very same database file and settings as the ledger.
CREATE TABLE bench_baseline (
    id BIGINT PRIMARY KEY,
    payload TEXT NOT NULL
);
