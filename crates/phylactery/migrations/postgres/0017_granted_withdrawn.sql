-- Phylactery ledger, version 17, PostgreSQL dialect: a granted step that was never sent can
-- fail (issue 30). SQLite's migration 15 is the same rule.
--
-- A crash between ward minting a step's grant and core journaling it STARTED leaves the step
-- GRANTED. When recovery cannot resume its experiment (another generation, a drifted prefix),
-- the instance is destroyed and the grant dies with it: the step never reached workbench, so
-- it becomes FAILED (`task/interrupted`), a terminal, instead of staying GRANTED forever. The
-- transition table is `StepState::can_become` in `src/state.rs`.

CREATE OR REPLACE FUNCTION run_step_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.experiment_id IS DISTINCT FROM OLD.experiment_id
        OR NEW.step_index IS DISTINCT FROM OLD.step_index
        OR NEW.step_digest IS DISTINCT FROM OLD.step_digest
        OR NEW.kind IS DISTINCT FROM OLD.kind THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    IF NOT (
        (OLD.state = 'PENDING' AND NEW.state = 'GRANTED')
        OR (OLD.state = 'GRANTED' AND NEW.state IN ('STARTED', 'FAILED'))
        OR (OLD.state = 'STARTED' AND NEW.state IN ('APPLIED', 'FAILED', 'UNKNOWN'))
    ) THEN
        RAISE EXCEPTION 'journal/invalid-transition';
    END IF;
    RETURN NEW;
END;
$$;
