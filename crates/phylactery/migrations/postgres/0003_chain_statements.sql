-- Phylactery ledger, version 3, PostgreSQL dialect: fewer round trips per durable step, same
-- rules. Each step that wrote two rows in a multi-statement transaction now writes them with one
-- statement (atomic by itself) whose trigger writes the second row.

-- Admission opens its turn: the OPEN ReachTurn@1 is written by the admission's own INSERT, so no
-- admission ever exists without its turn. The id rule is `ids::turn_id`: "turn_" + the admission
-- id without its "adm_" prefix.
CREATE FUNCTION admission_opens_turn_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO reach_turn (turn_id, admission_id, state, opened_at)
    VALUES ('turn_' || substr(NEW.admission_id, 5), NEW.admission_id, 'OPEN', NEW.admitted_at);
    RETURN NULL;
END;
$$;
CREATE TRIGGER admission_opens_turn AFTER INSERT ON discord_event_admission
FOR EACH ROW EXECUTE FUNCTION admission_opens_turn_fn();

-- A ReachDelivery@1 settles its SUBMITTING intent in the same statement. Recovery and taint
-- insert theirs after moving the intent to UNKNOWN themselves; anything else that finds the
-- intent not in the delivery's outcome under the same generation (a concurrent writer moved it
-- between the fenced SELECT and here) aborts the statement.
CREATE FUNCTION delivery_settles_intent_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE discord_delivery_intent SET state = NEW.outcome, settled_at = NEW.settled_at
    WHERE intent_id = NEW.intent_id AND state = 'SUBMITTING' AND generation = NEW.claim_generation;
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM discord_delivery_intent
        WHERE intent_id = NEW.intent_id AND state = NEW.outcome AND generation = NEW.claim_generation
    ) THEN
        RAISE EXCEPTION 'ledger/stale-generation';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER delivery_settles_intent AFTER INSERT ON reach_delivery
FOR EACH ROW EXECUTE FUNCTION delivery_settles_intent_fn();

-- The terminal commit of a turn with its PENDING intent, as one INSERT into this view: the
-- INSTEAD OF trigger terminates the OPEN turn (the `reach_turn_terminal_once` trigger refuses a
-- terminal one) and inserts the intent when one is given, atomically.
CREATE VIEW turn_commit AS
SELECT turn_id, state AS outcome, reason, answer_digest, terminal_at,
    NULL::TEXT AS intent_id, NULL::TEXT AS effect, NULL::TEXT AS payload_digest, NULL::TEXT AS nonce
FROM reach_turn WHERE false;

CREATE FUNCTION turn_commit_insert_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE reach_turn SET state = NEW.outcome, reason = NEW.reason,
        answer_digest = NEW.answer_digest, terminal_at = NEW.terminal_at
    WHERE turn_id = NEW.turn_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ledger/not-found';
    END IF;
    IF NEW.intent_id IS NOT NULL THEN
        INSERT INTO discord_delivery_intent (intent_id, turn_id, seq, effect, payload_digest, nonce,
            state, generation, created_at)
        VALUES (NEW.intent_id, NEW.turn_id, 1, NEW.effect, NEW.payload_digest, NEW.nonce, 'PENDING', 0,
            NEW.terminal_at);
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER turn_commit_insert INSTEAD OF INSERT ON turn_commit
FOR EACH ROW EXECUTE FUNCTION turn_commit_insert_fn();
