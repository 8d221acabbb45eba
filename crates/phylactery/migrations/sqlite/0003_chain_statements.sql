-- Phylactery ledger, version 3, SQLite dialect: fewer round trips per durable step, same rules.
-- Each step that wrote two rows in a multi-statement transaction now writes them with one
-- statement (atomic by itself) whose trigger writes the second row.

-- Admission opens its turn: the OPEN ReachTurn@1 is written by the admission's own INSERT, so no
-- admission ever exists without its turn. The id rule is `ids::turn_id`: "turn_" + the admission
-- id without its "adm_" prefix.
CREATE TRIGGER admission_opens_turn AFTER INSERT ON discord_event_admission
BEGIN
    INSERT INTO reach_turn (turn_id, admission_id, state, opened_at)
    VALUES ('turn_' || substr(NEW.admission_id, 5), NEW.admission_id, 'OPEN', NEW.admitted_at);
END;

-- A ReachDelivery@1 settles its SUBMITTING intent in the same statement. The settle INSERT
-- selects the intent under the generation fence; recovery and taint insert theirs after moving
-- the intent to UNKNOWN themselves, when this update matches nothing. SQLite runs one writer at a
-- time, so the fenced SELECT and this UPDATE see the same row.
CREATE TRIGGER delivery_settles_intent AFTER INSERT ON reach_delivery
BEGIN
    UPDATE discord_delivery_intent SET state = NEW.outcome, settled_at = NEW.settled_at
    WHERE intent_id = NEW.intent_id AND state = 'SUBMITTING' AND generation = NEW.claim_generation;
END;

-- The terminal commit of a turn with its PENDING intent, as one INSERT into this view: the
-- INSTEAD OF trigger terminates the OPEN turn (the `reach_turn_terminal_once` trigger refuses a
-- terminal one) and inserts the intent when one is given, atomically.
CREATE VIEW turn_commit AS
SELECT turn_id, state AS outcome, reason, answer_digest, terminal_at,
    NULL AS intent_id, NULL AS effect, NULL AS payload_digest, NULL AS nonce
FROM reach_turn WHERE 0;

CREATE TRIGGER turn_commit_insert INSTEAD OF INSERT ON turn_commit
BEGIN
    SELECT RAISE(ABORT, 'ledger/not-found')
    WHERE NOT EXISTS (SELECT 1 FROM reach_turn WHERE turn_id = NEW.turn_id);
    UPDATE reach_turn SET state = NEW.outcome, reason = NEW.reason,
        answer_digest = NEW.answer_digest, terminal_at = NEW.terminal_at
    WHERE turn_id = NEW.turn_id;
    INSERT INTO discord_delivery_intent (intent_id, turn_id, seq, effect, payload_digest, nonce,
        state, generation, created_at)
    SELECT NEW.intent_id, NEW.turn_id, 1, NEW.effect, NEW.payload_digest, NEW.nonce, 'PENDING', 0,
        NEW.terminal_at
    WHERE NEW.intent_id IS NOT NULL;
END;
