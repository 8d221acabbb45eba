-- Phylactery ledger, version 8, PostgreSQL dialect: the same guards for less server work per
-- chain step (issue 4's benchmark). Nothing the database refused before is accepted now.
--
-- * An intent's identity check, transition check and commit-sequence bump run in ONE BEFORE
--   UPDATE row trigger. Before, every update of an intent (claim, SUBMITTING, settle) called
--   two PL/pgSQL row triggers and a PL/pgSQL statement trigger. Identity is checked first, so
--   an edited effect is still refused as `ledger/immutable-identity`.
-- * The commit sequence (rollback detection, migration 2) is bumped by the row triggers the
--   chain already fires: the admission opening its turn, a turn terminating, an intent being
--   inserted or updated. A statement that writes no row no longer bumps it; every write still
--   does.
-- * `intent_by_state` is dropped: `intent_claim_order` (state, created_at, intent_id) serves
--   every query by state, and each index on the intent is one more entry written by each of
--   its state changes (none of them is a HOT update: state is indexed).

CREATE FUNCTION discord_delivery_intent_guard_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.intent_id IS DISTINCT FROM OLD.intent_id OR NEW.turn_id IS DISTINCT FROM OLD.turn_id
        OR NEW.seq IS DISTINCT FROM OLD.seq OR NEW.part_no IS DISTINCT FROM OLD.part_no
        OR NEW.effect IS DISTINCT FROM OLD.effect
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
        OR NEW.nonce IS DISTINCT FROM OLD.nonce OR NEW.supersedes IS DISTINCT FROM OLD.supersedes THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    IF NEW.generation < OLD.generation OR NOT (
        (OLD.state = 'PENDING' AND NEW.state = 'CLAIMED')
        OR (OLD.state = 'CLAIMED' AND NEW.state IN ('CLAIMED', 'SUBMITTING'))
        OR (OLD.state = 'CLAIMED' AND NEW.state = 'NOT_ATTEMPTED' AND NEW.generation = OLD.generation)
        OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN') AND NEW.generation = OLD.generation)
        OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED') AND NEW.generation = OLD.generation)
    ) THEN
        RAISE EXCEPTION 'intent/invalid-transition';
    END IF;
    PERFORM nextval('vault_commit_seq');
    RETURN NEW;
END;
$$;
DROP TRIGGER discord_delivery_intent_identity ON discord_delivery_intent;
DROP TRIGGER discord_delivery_intent_transition ON discord_delivery_intent;
DROP TRIGGER seq_intent ON discord_delivery_intent;
DROP FUNCTION discord_delivery_intent_identity_fn();
DROP FUNCTION discord_delivery_intent_transition_fn();
CREATE TRIGGER discord_delivery_intent_guard BEFORE UPDATE ON discord_delivery_intent
FOR EACH ROW EXECUTE FUNCTION discord_delivery_intent_guard_fn();

-- An inserted intent bumps the sequence in the trigger that already checks its part.
CREATE OR REPLACE FUNCTION intent_part_in_order_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.part_no > 1 AND NOT EXISTS (SELECT 1 FROM discord_delivery_intent
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no - 1 AND state = 'KNOWN_SENT') THEN
        RAISE EXCEPTION 'intent/part-out-of-order';
    END IF;
    IF NEW.part_no > 1 AND NOT EXISTS (SELECT 1 FROM delivery_part
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no AND effect = NEW.effect
            AND payload_digest = NEW.payload_digest) THEN
        RAISE EXCEPTION 'intent/part-not-recorded';
    END IF;
    IF EXISTS (SELECT 1 FROM discord_delivery_intent
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no
            AND state NOT IN ('KNOWN_REJECTED', 'NOT_ATTEMPTED')) THEN
        RAISE EXCEPTION 'intent/part-already-live';
    END IF;
    PERFORM nextval('vault_commit_seq');
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION reach_turn_terminal_once_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state <> 'OPEN' THEN
        RAISE EXCEPTION 'turn/already-terminal';
    END IF;
    PERFORM nextval('vault_commit_seq');
    RETURN NEW;
END;
$$;
DROP TRIGGER seq_turn ON reach_turn;

CREATE OR REPLACE FUNCTION admission_opens_turn_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO reach_turn (turn_id, admission_id, state, opened_at)
    VALUES ('turn_' || substr(NEW.admission_id, 5), NEW.admission_id, 'OPEN', NEW.admitted_at);
    PERFORM nextval('vault_commit_seq');
    RETURN NULL;
END;
$$;
DROP TRIGGER seq_admission ON discord_event_admission;

DROP INDEX intent_by_state;
