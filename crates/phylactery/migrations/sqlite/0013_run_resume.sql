-- Phylactery ledger, version 13, SQLite dialect: what core needs to resume a run after a
-- restart (issue 30 item 2; `src/journal.rs`). PostgreSQL's migration 15 is the same schema.
--
-- * `task_runs.goal`: the operator's goal text (its digest is `goal_digest`); NULL for a run
--   opened before this version, which recovery ends instead of resuming.
-- * `run_steps.record`: workbench's step record, written with the step's outcome; its digest is
--   `record_digest`.
-- Raw-SQL guards: the goal never changes; a record is written once, with its digest.

ALTER TABLE task_runs ADD COLUMN goal TEXT CHECK (goal IS NULL OR length(goal) BETWEEN 1 AND 4000);
ALTER TABLE run_steps ADD COLUMN record BLOB
    CHECK (record IS NULL OR (record_digest IS NOT NULL AND length(record) <= 1048576));

CREATE TRIGGER task_run_goal BEFORE UPDATE ON task_runs
WHEN NEW.goal IS NOT OLD.goal
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;
CREATE TRIGGER run_step_record BEFORE UPDATE ON run_steps
WHEN OLD.record IS NOT NULL AND NEW.record IS NOT OLD.record
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;
