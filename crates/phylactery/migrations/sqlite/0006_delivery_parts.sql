-- Phylactery ledger, version 6, SQLite dialect: multi-part answers (issue #7, rendering).
-- An answer longer than one Discord message is delivered as parts 1..N, in order, each exactly
-- once, each through its own DiscordDeliveryIntent@1 with its own deterministic nonce.
--
-- * Every intent names its part (`part_no`, 1 for every intent written before this version).
--   `seq` stays the intent's place in its turn: a part's intent, or a successor after proved
--   absence, always takes the next number, so the newest intent of a turn is still its highest
--   `seq`.
-- * Parts 2..N are recorded in `delivery_part` by the same statement that terminates the turn
--   and writes part 1's PENDING intent (rows 2..N of the one INSERT into `turn_commit`), with
--   the intent id and nonce their first intent will carry (computed in Rust: SQLite has no
--   digest function).
-- * Part k+1's PENDING intent is written by the statement that settles part k KNOWN_SENT (the
--   sender's report or reconciliation evidence), never earlier. KNOWN_REJECTED and
--   NOT_ATTEMPTED stop the rest: their parts stay recorded, without an intent, as never sent.
--   UNKNOWN holds them until evidence settles it.

ALTER TABLE discord_delivery_intent ADD COLUMN part_no INTEGER NOT NULL DEFAULT 1
    CHECK (part_no BETWEEN 1 AND 16);

CREATE TABLE delivery_part (
    turn_id TEXT NOT NULL REFERENCES reach_turn (turn_id),
    part_no INTEGER NOT NULL CHECK (part_no BETWEEN 2 AND 16),
    intent_id TEXT NOT NULL UNIQUE,
    effect TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE CHECK (length(nonce) BETWEEN 1 AND 25),
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (turn_id, part_no)
);

-- Parts are recorded with the turn, before anything of it was claimed, in order.
CREATE TRIGGER delivery_part_with_turn BEFORE INSERT ON delivery_part
BEGIN
    SELECT RAISE(ABORT, 'part/after-delivery-began')
    WHERE NOT EXISTS (SELECT 1 FROM discord_delivery_intent
        WHERE turn_id = NEW.turn_id AND part_no = 1 AND seq = 1 AND state = 'PENDING');
    SELECT RAISE(ABORT, 'part/out-of-order')
    WHERE NEW.part_no > 2 AND NOT EXISTS (SELECT 1 FROM delivery_part
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no - 1);
END;
CREATE TRIGGER delivery_part_immutable BEFORE UPDATE ON delivery_part
BEGIN SELECT RAISE(ABORT, 'ledger/immutable-identity'); END;
CREATE TRIGGER no_delete_delivery_part BEFORE DELETE ON delivery_part
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;

-- An intent of part k > 1 exists only once part k-1 is KNOWN_SENT, and sends exactly what was
-- recorded for part k. At most one intent per part is live or sent: another one follows only
-- after proved absence settled its predecessor KNOWN_REJECTED.
CREATE TRIGGER intent_part_in_order BEFORE INSERT ON discord_delivery_intent
BEGIN
    SELECT RAISE(ABORT, 'intent/part-out-of-order')
    WHERE NEW.part_no > 1 AND NOT EXISTS (SELECT 1 FROM discord_delivery_intent
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no - 1 AND state = 'KNOWN_SENT');
    SELECT RAISE(ABORT, 'intent/part-not-recorded')
    WHERE NEW.part_no > 1 AND NOT EXISTS (SELECT 1 FROM delivery_part
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no AND effect = NEW.effect
            AND payload_digest = NEW.payload_digest);
    SELECT RAISE(ABORT, 'intent/part-already-live')
    WHERE EXISTS (SELECT 1 FROM discord_delivery_intent
        WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no
            AND state NOT IN ('KNOWN_REJECTED', 'NOT_ATTEMPTED'));
END;

-- Part k KNOWN_SENT (from SUBMITTING by the sender's report, or from UNKNOWN by evidence)
-- opens part k+1, in the same statement.
CREATE TRIGGER intent_sent_opens_next_part AFTER UPDATE OF state ON discord_delivery_intent
WHEN NEW.state = 'KNOWN_SENT' AND OLD.state <> 'KNOWN_SENT'
BEGIN
    INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest,
        nonce, state, generation, created_at)
    SELECT p.intent_id, p.turn_id, p.part_no, NEW.seq + 1, p.effect, p.payload_digest, p.nonce,
        'PENDING', 0, COALESCE(NEW.settled_at, NEW.created_at)
    FROM delivery_part p WHERE p.turn_id = NEW.turn_id AND p.part_no = NEW.part_no + 1;
END;

-- The part an intent delivers is part of what it sends: fixed when it is committed.
DROP TRIGGER discord_delivery_intent_identity;
CREATE TRIGGER discord_delivery_intent_identity BEFORE UPDATE ON discord_delivery_intent
WHEN NEW.intent_id IS NOT OLD.intent_id OR NEW.turn_id IS NOT OLD.turn_id OR NEW.seq IS NOT OLD.seq
    OR NEW.part_no IS NOT OLD.part_no
    OR NEW.effect IS NOT OLD.effect OR NEW.payload_digest IS NOT OLD.payload_digest
    OR NEW.nonce IS NOT OLD.nonce OR NEW.supersedes IS NOT OLD.supersedes
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;

-- The terminal commit of a turn, still one INSERT: row 1 (part_no 1 or NULL) terminates the OPEN
-- turn and writes part 1's PENDING intent as version 3 did; rows 2..N record the later parts.
DROP VIEW turn_commit;
CREATE VIEW turn_commit AS
SELECT turn_id, state AS outcome, reason, answer_digest, terminal_at,
    NULL AS intent_id, NULL AS effect, NULL AS payload_digest, NULL AS nonce, NULL AS part_no
FROM reach_turn WHERE 0;

CREATE TRIGGER turn_commit_insert INSTEAD OF INSERT ON turn_commit
BEGIN
    SELECT RAISE(ABORT, 'ledger/not-found')
    WHERE NOT EXISTS (SELECT 1 FROM reach_turn WHERE turn_id = NEW.turn_id);
    UPDATE reach_turn SET state = NEW.outcome, reason = NEW.reason,
        answer_digest = NEW.answer_digest, terminal_at = NEW.terminal_at
    WHERE turn_id = NEW.turn_id AND COALESCE(NEW.part_no, 1) = 1;
    INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest,
        nonce, state, generation, created_at)
    SELECT NEW.intent_id, NEW.turn_id, 1, 1, NEW.effect, NEW.payload_digest, NEW.nonce, 'PENDING',
        0, NEW.terminal_at
    WHERE NEW.intent_id IS NOT NULL AND COALESCE(NEW.part_no, 1) = 1;
    INSERT INTO delivery_part (turn_id, part_no, intent_id, effect, payload_digest, nonce,
        recorded_at)
    SELECT NEW.turn_id, NEW.part_no, NEW.intent_id, NEW.effect, NEW.payload_digest, NEW.nonce,
        NEW.terminal_at
    WHERE NEW.part_no > 1;
END;
