-- Phylactery ledger, version 15, SQLite dialect: a granted step that was never sent can fail
-- (issue 30). PostgreSQL's migration 17 is the same rule.
--
-- A crash between ward minting a step's grant and core journaling it STARTED leaves the step
-- GRANTED. When recovery cannot resume its experiment (another generation, a drifted prefix),
-- the instance is destroyed and the grant dies with it: the step never reached workbench, so
-- it becomes FAILED (`task/interrupted`), a terminal, instead of staying GRANTED forever. The
-- transition table is `StepState::can_become` in `src/state.rs`.

-- SQLite fires a table's triggers newest first, so the two guards created after the transition
-- rule are created again after it: an identity change is still refused as such.
DROP TRIGGER run_step_record;
DROP TRIGGER run_step_identity;
DROP TRIGGER run_step_transition;
CREATE TRIGGER run_step_transition BEFORE UPDATE ON run_steps
WHEN NOT (
    (OLD.state = 'PENDING' AND NEW.state = 'GRANTED')
    OR (OLD.state = 'GRANTED' AND NEW.state IN ('STARTED', 'FAILED'))
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
CREATE TRIGGER run_step_record BEFORE UPDATE ON run_steps
WHEN OLD.record IS NOT NULL AND NEW.record IS NOT OLD.record
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;
