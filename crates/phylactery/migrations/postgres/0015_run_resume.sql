-- Phylactery ledger, version 15, PostgreSQL dialect: what core needs to resume a run after a
-- restart (issue 30 item 2; `src/journal.rs`). SQLite's migration 13 is the same schema.
--
-- * `task_runs.goal`: the operator's goal text (its digest is `goal_digest`); NULL for a run
--   opened before this version, which recovery ends instead of resuming.
-- * `run_steps.record`: workbench's step record, written with the step's outcome; its digest is
--   `record_digest` (checked here; SQLite has no SHA-256, and Rust computes it).
-- Raw-SQL guards: the goal never changes; a record is written once, with its digest.

ALTER TABLE task_runs ADD COLUMN goal TEXT
    CHECK (goal IS NULL OR length(goal) BETWEEN 1 AND 4000);
ALTER TABLE run_steps ADD COLUMN record BYTEA;
ALTER TABLE run_steps ADD CONSTRAINT run_steps_record CHECK (record IS NULL
    OR (octet_length(record) <= 1048576
        AND record_digest = 'sha256:' || encode(sha256(record), 'hex')));

CREATE FUNCTION task_run_goal_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.goal IS DISTINCT FROM OLD.goal THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_run_goal BEFORE UPDATE ON task_runs
FOR EACH ROW EXECUTE FUNCTION task_run_goal_fn();

CREATE FUNCTION run_step_record_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.record IS NOT NULL AND NEW.record IS DISTINCT FROM OLD.record THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER run_step_record BEFORE UPDATE ON run_steps
FOR EACH ROW EXECUTE FUNCTION run_step_record_fn();
