-- Phylactery ledger, version 13, PostgreSQL dialect: task runs and their Room (issue 37 item 1;
-- `src/room.rs` documents the rules). SQLite's migration 11 is the same schema.
--
-- * `task_runs`: one row per run, `open` until it is concluded or ended (`end_code` only then).
-- * `room_facts`: the Room's signed facts, a hash chain per run (seq 0, 1, ...; each row names
--   the digest of the one before), append-only, canonical bytes beside their signature.
-- * `room_passages`: each passage's attempt, written SUBMITTING before the call and settled
--   once (answered, refused, failed) or marked unknown by recovery.
-- * `room_records`: the run's signed execution records and recipe, immutable.
-- Raw-SQL guards: a fact extends its run's chain and only while the run is open; a run leaves
-- `open` once; a passage leaves `submitting` once; facts and records never change; nothing is
-- deleted. Every insert advances the vault's commit sequence (rollback detection).

CREATE TABLE task_runs (
    run_id TEXT PRIMARY KEY CHECK (length(run_id) BETWEEN 5 AND 128 AND run_id LIKE 'run-%'),
    pack TEXT NOT NULL CHECK (length(pack) BETWEEN 1 AND 256),
    pack_generation BIGINT NOT NULL CHECK (pack_generation >= 0),
    goal_digest TEXT NOT NULL CHECK (length(goal_digest) = 71),
    state TEXT NOT NULL CHECK (state IN ('open', 'concluded', 'ended')),
    end_code TEXT CHECK (end_code IS NULL OR length(end_code) >= 1),
    opened_at_ms BIGINT NOT NULL,
    ended_at_ms BIGINT,
    CHECK ((state = 'ended') = (end_code IS NOT NULL)),
    CHECK ((state = 'open') = (ended_at_ms IS NULL))
);
CREATE INDEX task_runs_newest ON task_runs (opened_at_ms DESC, run_id DESC);

CREATE TABLE room_facts (
    run_id TEXT NOT NULL REFERENCES task_runs (run_id),
    seq BIGINT NOT NULL CHECK (seq >= 0),
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    prev_digest TEXT CHECK (prev_digest IS NULL OR length(prev_digest) = 71),
    kind TEXT NOT NULL CHECK (length(kind) >= 1),
    bytes BYTEA NOT NULL,
    signature TEXT NOT NULL CHECK (length(signature) >= 1),
    key_id TEXT NOT NULL CHECK (length(key_id) >= 1),
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq),
    CHECK ((seq = 0) = (prev_digest IS NULL))
);

CREATE TABLE room_passages (
    attempt_id TEXT PRIMARY KEY CHECK (length(attempt_id) BETWEEN 1 AND 128),
    run_id TEXT NOT NULL REFERENCES task_runs (run_id),
    round BIGINT NOT NULL CHECK (round >= 0),
    role TEXT NOT NULL CHECK (length(role) >= 1),
    payload_digest TEXT NOT NULL CHECK (length(payload_digest) = 71),
    decision_id TEXT NOT NULL UNIQUE CHECK (length(decision_id) >= 1),
    state TEXT NOT NULL CHECK (state IN ('submitting', 'answered', 'refused', 'failed',
        'unknown')),
    answer_digest TEXT CHECK (answer_digest IS NULL OR length(answer_digest) = 71),
    code TEXT,
    created_at_ms BIGINT NOT NULL,
    settled_at_ms BIGINT,
    CHECK ((state = 'submitting') = (settled_at_ms IS NULL)),
    CHECK ((state = 'answered') = (answer_digest IS NOT NULL)),
    CHECK ((state IN ('refused', 'failed')) = (code IS NOT NULL))
);
CREATE INDEX room_passages_by_run ON room_passages (run_id, created_at_ms, attempt_id);
CREATE INDEX room_passages_unsettled ON room_passages (created_at_ms)
    WHERE state = 'submitting';

CREATE TABLE room_records (
    run_id TEXT NOT NULL REFERENCES task_runs (run_id),
    kind TEXT NOT NULL CHECK (kind IN ('execution-record', 'recipe')),
    n BIGINT NOT NULL CHECK (n >= 0),
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    bytes BYTEA NOT NULL,
    signature TEXT NOT NULL CHECK (length(signature) >= 1),
    key_id TEXT NOT NULL CHECK (length(key_id) >= 1),
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, kind, n)
);

-- A fact extends its run's chain (seq 0 first, then the successor of a row whose digest it
-- names), and only while the run is open.
CREATE FUNCTION room_fact_chain_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT state FROM task_runs WHERE run_id = NEW.run_id) IS DISTINCT FROM 'open' THEN
        RAISE EXCEPTION 'room/run-not-open';
    END IF;
    IF NEW.seq > 0 AND NOT EXISTS (SELECT 1 FROM room_facts WHERE run_id = NEW.run_id
            AND seq = NEW.seq - 1 AND digest = NEW.prev_digest) THEN
        RAISE EXCEPTION 'room/chain-broken';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER room_fact_chain BEFORE INSERT ON room_facts
FOR EACH ROW EXECUTE FUNCTION room_fact_chain_fn();

-- A run leaves `open` once and its identity never changes.
CREATE FUNCTION task_run_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.pack IS DISTINCT FROM OLD.pack
        OR NEW.pack_generation IS DISTINCT FROM OLD.pack_generation
        OR NEW.goal_digest IS DISTINCT FROM OLD.goal_digest
        OR NEW.opened_at_ms IS DISTINCT FROM OLD.opened_at_ms THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    IF OLD.state <> 'open' THEN
        RAISE EXCEPTION 'room/run-not-open';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_run_transition BEFORE UPDATE ON task_runs
FOR EACH ROW EXECUTE FUNCTION task_run_transition_fn();

-- A passage leaves `submitting` once and its identity never changes.
CREATE FUNCTION room_passage_settle_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.attempt_id IS DISTINCT FROM OLD.attempt_id OR NEW.run_id IS DISTINCT FROM OLD.run_id
        OR NEW.round IS DISTINCT FROM OLD.round OR NEW.role IS DISTINCT FROM OLD.role
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
        OR NEW.decision_id IS DISTINCT FROM OLD.decision_id
        OR NEW.created_at_ms IS DISTINCT FROM OLD.created_at_ms THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    IF OLD.state <> 'submitting' THEN
        RAISE EXCEPTION 'room/passage-settled';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER room_passage_settle BEFORE UPDATE ON room_passages
FOR EACH ROW EXECUTE FUNCTION room_passage_settle_fn();

CREATE TRIGGER room_facts_immutable BEFORE UPDATE ON room_facts
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER room_records_immutable BEFORE UPDATE ON room_records
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_task_runs BEFORE DELETE OR TRUNCATE ON task_runs
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_room_facts BEFORE DELETE OR TRUNCATE ON room_facts
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_room_passages BEFORE DELETE OR TRUNCATE ON room_passages
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_room_records BEFORE DELETE OR TRUNCATE ON room_records
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();

CREATE TRIGGER seq_task_runs AFTER INSERT OR UPDATE ON task_runs
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_room_facts AFTER INSERT ON room_facts
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_room_passages AFTER INSERT OR UPDATE ON room_passages
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
CREATE TRIGGER seq_room_records AFTER INSERT ON room_records
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
