-- Phylactery ledger, version 12, SQLite dialect: the run journal (issue 30 item 1;
-- `src/journal.rs` documents the rules). PostgreSQL's migration 14 is the same schema.
--
-- * `run_experiments`: one row per experiment of a run, CREATING until its instance's fate is
--   known: an outcome (written once destruction is confirmed) or ROLLBACK_PENDING, then
--   DESTROYED. The instance id is set once, when the instance exists.
-- * `run_steps`: one row per stamped step, PENDING at the experiment's creation, then
--   GRANTED, STARTED (before the step is sent), and APPLIED, FAILED or UNKNOWN once.
-- Raw-SQL guards: both tables follow the transition tables of `src/state.rs`; identities and
-- an instance id once set never change; nothing is deleted; every write bumps the vault's
-- commit sequence.

CREATE TABLE run_experiments (
    experiment_id TEXT PRIMARY KEY CHECK (length(experiment_id) BETWEEN 1 AND 128),
    run_id TEXT NOT NULL REFERENCES task_runs (run_id),
    n INTEGER NOT NULL CHECK (n >= 1),
    plan_digest TEXT NOT NULL CHECK (length(plan_digest) = 71),
    instance_id TEXT CHECK (instance_id IS NULL OR length(instance_id) BETWEEN 1 AND 128),
    state TEXT NOT NULL CHECK (state IN ('CREATING', 'RUNNING', 'VERIFYING', 'SUCCEEDED',
        'VERIFICATION_FAILED', 'FAILED', 'REFUSED', 'ROLLBACK_PENDING', 'DESTROYED')),
    code TEXT CHECK (code IS NULL OR length(code) >= 1),
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    UNIQUE (run_id, n),
    CHECK (state NOT IN ('RUNNING', 'VERIFYING', 'SUCCEEDED', 'VERIFICATION_FAILED', 'FAILED')
        OR instance_id IS NOT NULL),
    CHECK (state NOT IN ('REFUSED', 'ROLLBACK_PENDING') OR code IS NOT NULL)
);
CREATE INDEX run_experiments_unfinished ON run_experiments (created_at_ms)
    WHERE state IN ('CREATING', 'RUNNING', 'VERIFYING', 'ROLLBACK_PENDING');

CREATE TABLE run_steps (
    experiment_id TEXT NOT NULL REFERENCES run_experiments (experiment_id),
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    step_digest TEXT NOT NULL CHECK (length(step_digest) = 71),
    kind TEXT NOT NULL CHECK (kind IN ('run', 'patch', 'restart', 'verify')),
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'GRANTED', 'STARTED', 'APPLIED', 'FAILED',
        'UNKNOWN')),
    record_digest TEXT CHECK (record_digest IS NULL OR length(record_digest) = 71),
    code TEXT CHECK (code IS NULL OR length(code) >= 1),
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (experiment_id, step_index),
    CHECK (state <> 'APPLIED' OR record_digest IS NOT NULL),
    CHECK (state <> 'FAILED' OR record_digest IS NOT NULL OR code IS NOT NULL)
) WITHOUT ROWID;

CREATE TRIGGER run_experiment_transition BEFORE UPDATE ON run_experiments
WHEN NOT (
    (OLD.state = 'CREATING' AND NEW.state IN ('RUNNING', 'REFUSED', 'ROLLBACK_PENDING'))
    OR (OLD.state = 'RUNNING' AND NEW.state IN ('VERIFYING', 'FAILED', 'REFUSED',
        'ROLLBACK_PENDING'))
    OR (OLD.state = 'VERIFYING' AND NEW.state IN ('SUCCEEDED', 'VERIFICATION_FAILED',
        'ROLLBACK_PENDING'))
    OR (OLD.state = 'ROLLBACK_PENDING' AND NEW.state = 'DESTROYED')
)
BEGIN
    SELECT RAISE(ABORT, 'journal/invalid-transition');
END;
CREATE TRIGGER run_experiment_identity BEFORE UPDATE ON run_experiments
WHEN NEW.experiment_id IS NOT OLD.experiment_id OR NEW.run_id IS NOT OLD.run_id
    OR NEW.n IS NOT OLD.n OR NEW.plan_digest IS NOT OLD.plan_digest
    OR NEW.created_at_ms IS NOT OLD.created_at_ms
    OR (OLD.instance_id IS NOT NULL AND NEW.instance_id IS NOT OLD.instance_id)
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

CREATE TRIGGER run_step_transition BEFORE UPDATE ON run_steps
WHEN NOT (
    (OLD.state = 'PENDING' AND NEW.state = 'GRANTED')
    OR (OLD.state = 'GRANTED' AND NEW.state = 'STARTED')
    OR (OLD.state = 'STARTED' AND NEW.state IN ('APPLIED', 'FAILED', 'UNKNOWN'))
)
BEGIN
    SELECT RAISE(ABORT, 'journal/invalid-transition');
END;
CREATE TRIGGER run_step_identity BEFORE UPDATE ON run_steps
WHEN NEW.experiment_id IS NOT OLD.experiment_id OR NEW.step_index IS NOT OLD.step_index
    OR NEW.step_digest IS NOT OLD.step_digest OR NEW.kind IS NOT OLD.kind
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

CREATE TRIGGER no_delete_run_experiments BEFORE DELETE ON run_experiments
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_run_steps BEFORE DELETE ON run_steps
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;

CREATE TRIGGER seq_run_experiments_insert AFTER INSERT ON run_experiments
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_run_experiments_update AFTER UPDATE ON run_experiments
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_run_steps_insert AFTER INSERT ON run_steps
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER seq_run_steps_update AFTER UPDATE ON run_steps
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
