-- Phylactery ledger, version 10, PostgreSQL dialect: the row rules (CHECKs) of the intent, the
-- turn and the delivery, and the three edges of the chain's hot path (foreign keys), checked by
-- the row trigger each table already fires; the intent's state index made partial. Nothing the
-- database refused before is accepted now (`tests/guards.rs`).
--
-- * PostgreSQL prepares a table's CHECK constraints afresh for every statement that writes the
--   table: each is parsed back from its stored text and compiled (ExecRelCheck, once per
--   query). An intent is written four times per chain (insert, claim, SUBMITTING, settlement)
--   and had nine CHECKs; perf showed their preparation (pg_strtok/nodeRead under
--   ExecConstraints) as the largest single cost of the chain on the server. The same nine
--   rules now run in the intent's guard trigger, whose expressions PL/pgSQL compiles once per
--   connection. A breach raises check_violation (SQLSTATE 23514) naming the rule, as the CHECK
--   did. The trigger also fires on INSERT now, where it runs the part-order rules of
--   `intent_part_in_order` (one PL/pgSQL call per write instead of two).
-- * `intent_claim_order` (state, created_at, intent_id) is replaced by partial indexes that hold
--   only the intents a query looks for: PENDING and CLAIMED ones in claim order, SUBMITTING and
--   UNKNOWN ones for recovery, taint and reconciliation. A settled intent (nearly all of them)
--   is in none, so settling writes no entry there. It also stops the planner from reaching one
--   intent by (state, intent_id) through the state index: every superseded version of every
--   intent in that state sat in the same key range until vacuum, so SUBMITTING and settlement
--   walked them all (0.23 ms per statement after a few thousand chains); a statement naming an
--   intent now finds it by its primary key.

-- Each PL/pgSQL expression costs a setup per transaction, and every chain step is its own
-- transaction, so an update's rules are one CASE, and an insert's lookups are one query (the
-- lookups for a later part only run for one).
CREATE OR REPLACE FUNCTION discord_delivery_intent_guard_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
    turn_exists BOOLEAN;
    part_live BOOLEAN;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT EXISTS (SELECT 1 FROM reach_turn WHERE turn_id = NEW.turn_id),
            EXISTS (SELECT 1 FROM discord_delivery_intent
                WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no
                    AND state NOT IN ('KNOWN_REJECTED', 'NOT_ATTEMPTED'))
        INTO turn_exists, part_live;
        IF NOT turn_exists THEN
            RAISE EXCEPTION 'insert or update on table "discord_delivery_intent" violates foreign key constraint "intent_of_turn"'
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'intent_of_turn';
        END IF;
        -- An intent of part k > 1 exists only once part k-1 is KNOWN_SENT and sends exactly
        -- what was recorded for part k; at most one intent per part is live or sent.
        IF NEW.part_no > 1 THEN
            IF NOT EXISTS (SELECT 1 FROM discord_delivery_intent
                WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no - 1 AND state = 'KNOWN_SENT') THEN
                RAISE EXCEPTION 'intent/part-out-of-order';
            END IF;
            IF NOT EXISTS (SELECT 1 FROM delivery_part
                WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no AND effect = NEW.effect
                    AND payload_digest = NEW.payload_digest) THEN
                RAISE EXCEPTION 'intent/part-not-recorded';
            END IF;
        END IF;
        IF part_live THEN
            RAISE EXCEPTION 'intent/part-already-live';
        END IF;
    END IF;
    -- An update's identity and transition (refusal codes), then the row rules (the CHECK
    -- constraints of versions 1, 4 and 6, by name). As with a CHECK, a rule whose expression is
    -- NULL passes.
    broken := CASE
        WHEN TG_OP = 'UPDATE' AND (NEW.intent_id IS DISTINCT FROM OLD.intent_id
            OR NEW.turn_id IS DISTINCT FROM OLD.turn_id
            OR NEW.seq IS DISTINCT FROM OLD.seq OR NEW.part_no IS DISTINCT FROM OLD.part_no
            OR NEW.effect IS DISTINCT FROM OLD.effect
            OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
            OR NEW.nonce IS DISTINCT FROM OLD.nonce OR NEW.supersedes IS DISTINCT FROM OLD.supersedes)
            THEN 'ledger/immutable-identity'
        WHEN TG_OP = 'UPDATE' AND (NEW.generation < OLD.generation OR NOT (
            (OLD.state = 'PENDING' AND NEW.state = 'CLAIMED')
            OR (OLD.state = 'CLAIMED' AND NEW.state IN ('CLAIMED', 'SUBMITTING'))
            OR (OLD.state = 'CLAIMED' AND NEW.state = 'NOT_ATTEMPTED' AND NEW.generation = OLD.generation)
            OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN') AND NEW.generation = OLD.generation)
            OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED') AND NEW.generation = OLD.generation)
        )) THEN 'intent/invalid-transition'
        WHEN NOT (NEW.state IN ('PENDING', 'CLAIMED', 'SUBMITTING', 'KNOWN_SENT', 'KNOWN_REJECTED',
            'UNKNOWN', 'NOT_ATTEMPTED')) THEN 'intent_state_known'
        WHEN NOT (NEW.seq >= 1) THEN 'intent_seq_positive'
        WHEN NOT (NEW.part_no BETWEEN 1 AND 16) THEN 'intent_part_no_range'
        WHEN NOT (length(NEW.nonce) BETWEEN 1 AND 25) THEN 'intent_nonce_length'
        WHEN NOT (NEW.generation >= 0) THEN 'intent_generation_nonnegative'
        WHEN NOT ((NEW.state = 'PENDING') = (NEW.generation = 0)) THEN 'intent_pending_iff_unclaimed'
        WHEN NOT (NEW.state = 'PENDING' OR (NEW.lease_owner IS NOT NULL
            AND NEW.lease_expires_at IS NOT NULL)) THEN 'intent_claimed_with_lease'
        WHEN NOT (NEW.state IN ('PENDING', 'CLAIMED', 'NOT_ATTEMPTED')
            OR NEW.submitting_at IS NOT NULL) THEN 'intent_submitted_when_sent'
        WHEN NOT (NEW.state <> 'NOT_ATTEMPTED' OR NEW.submitting_at IS NULL)
            THEN 'intent_not_attempted_unsubmitted'
    END;
    IF broken IS NOT NULL THEN
        IF strpos(broken, '/') > 0 THEN
            RAISE EXCEPTION '%', broken;
        END IF;
        RAISE EXCEPTION 'new row for relation "discord_delivery_intent" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'discord_delivery_intent';
    END IF;
    PERFORM nextval('vault_commit_seq');
    RETURN NEW;
END;
$$;
DROP TRIGGER discord_delivery_intent_guard ON discord_delivery_intent;
DROP TRIGGER intent_part_in_order ON discord_delivery_intent;
DROP FUNCTION intent_part_in_order_fn();
CREATE TRIGGER discord_delivery_intent_guard BEFORE INSERT OR UPDATE ON discord_delivery_intent
FOR EACH ROW EXECUTE FUNCTION discord_delivery_intent_guard_fn();


DROP INDEX intent_claim_order;
CREATE INDEX intent_pending_order ON discord_delivery_intent (created_at, intent_id)
    WHERE state = 'PENDING';
CREATE INDEX intent_claimed_order ON discord_delivery_intent (created_at, intent_id)
    WHERE state = 'CLAIMED';
CREATE INDEX intent_unsettled ON discord_delivery_intent (created_at, intent_id)
    WHERE state IN ('SUBMITTING', 'UNKNOWN');

-- The same for a turn (written twice per chain) and a delivery (once): their CHECKs become rules
-- of the row triggers each already had. The turn's now fires on INSERT too; a delivery's insert
-- is checked by the trigger that settles its intent (below).
CREATE OR REPLACE FUNCTION reach_turn_terminal_once_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.state <> 'OPEN' THEN
            RAISE EXCEPTION 'turn/already-terminal';
        END IF;
        IF NEW.turn_id IS DISTINCT FROM OLD.turn_id OR NEW.admission_id IS DISTINCT FROM OLD.admission_id
            OR NEW.opened_at IS DISTINCT FROM OLD.opened_at THEN
            RAISE EXCEPTION 'ledger/immutable-identity';
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM discord_event_admission WHERE admission_id = NEW.admission_id) THEN
        RAISE EXCEPTION 'insert or update on table "reach_turn" violates foreign key constraint "turn_of_admission"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'turn_of_admission';
    END IF;
    broken := CASE
        WHEN NOT (NEW.state IN ('OPEN', 'SUCCEEDED', 'REFUSED', 'DEPENDENCY_UNAVAILABLE', 'EXPIRED',
            'FAILED', 'INDETERMINATE')) THEN 'turn_state_known'
        WHEN NOT ((NEW.state = 'OPEN') = (NEW.terminal_at IS NULL)) THEN 'turn_open_until_terminal'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "reach_turn" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'reach_turn';
    END IF;
    -- An inserted turn's sequence bump is its admission's (`admission_opens_turn_fn`).
    IF TG_OP = 'UPDATE' THEN
        PERFORM nextval('vault_commit_seq');
    END IF;
    RETURN NEW;
END;
$$;
DROP TRIGGER reach_turn_terminal_once ON reach_turn;
CREATE TRIGGER reach_turn_terminal_once BEFORE INSERT OR UPDATE ON reach_turn
FOR EACH ROW EXECUTE FUNCTION reach_turn_terminal_once_fn();

-- A delivery's row rules, for its two triggers: the insert's (which settles the intent) and
-- the update's (reconciliation of an UNKNOWN outcome). A SQL function, inlined where it is used.
CREATE FUNCTION reach_delivery_broken_rule(d reach_delivery) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN NOT (d.outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN', 'NOT_ATTEMPTED'))
            THEN 'delivery_outcome_known'
        WHEN NOT (d.claim_generation >= 1) THEN 'delivery_generation_positive'
        WHEN NOT (d.outcome <> 'KNOWN_SENT' OR d.message_id IS NOT NULL)
            THEN 'delivery_sent_names_message'
        WHEN NOT (d.outcome <> 'NOT_ATTEMPTED' OR (d.message_id IS NULL
            AND d.platform_status IS NULL AND d.detail IS NOT NULL))
            THEN 'delivery_not_attempted_bare'
    END
$$;

CREATE OR REPLACE FUNCTION reach_delivery_settled_once_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    IF NOT (OLD.outcome = 'UNKNOWN' AND NEW.outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED'))
        OR NEW.intent_id IS DISTINCT FROM OLD.intent_id
        OR NEW.effect IS DISTINCT FROM OLD.effect
        OR NEW.payload_digest IS DISTINCT FROM OLD.payload_digest
        OR NEW.nonce IS DISTINCT FROM OLD.nonce
        OR NEW.claim_generation IS DISTINCT FROM OLD.claim_generation THEN
        RAISE EXCEPTION 'delivery/already-settled';
    END IF;
    broken := reach_delivery_broken_rule(NEW);
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "reach_delivery" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'reach_delivery';
    END IF;
    RETURN NEW;
END;
$$;

-- An inserted delivery is checked by the trigger that settles its intent (one PL/pgSQL call per
-- settlement): its rules first, then the intent it names, which must exist (the edge) and be
-- SUBMITTING (CLAIMED for NOT_ATTEMPTED) at the delivery's generation, or already in the
-- delivery's outcome (recovery and taint move the intent themselves).
CREATE OR REPLACE FUNCTION delivery_settles_intent_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    broken := reach_delivery_broken_rule(NEW);
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "reach_delivery" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'reach_delivery';
    END IF;
    UPDATE discord_delivery_intent SET state = NEW.outcome, settled_at = NEW.settled_at
    WHERE intent_id = NEW.intent_id AND generation = NEW.claim_generation
        AND state = CASE WHEN NEW.outcome = 'NOT_ATTEMPTED' THEN 'CLAIMED' ELSE 'SUBMITTING' END;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT 1 FROM discord_delivery_intent WHERE intent_id = NEW.intent_id) THEN
            RAISE EXCEPTION 'insert or update on table "reach_delivery" violates foreign key constraint "delivery_of_intent"'
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'delivery_of_intent';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM discord_delivery_intent
            WHERE intent_id = NEW.intent_id AND state = NEW.outcome AND generation = NEW.claim_generation) THEN
            RAISE EXCEPTION 'ledger/stale-generation';
        END IF;
    END IF;
    RETURN NULL;
END;
$$;


-- Every CHECK of the intent, the turn and the delivery is dropped: the row triggers above hold
-- the same rules. The three edges of the chain's hot path (turn -> admission, intent -> turn,
-- delivery -> intent) are checked by those triggers instead of foreign keys. A foreign key check
-- also locks the parent row (FOR KEY SHARE: a WAL record and a dirtied page per edge) to keep it
-- from being deleted or re-keyed before commit; here no parent can be: DELETE and TRUNCATE of
-- every ledger table are refused, an admission never changes, and a turn's, intent's or
-- delivery's identity is immutable (the checks above). A missing parent raises
-- foreign_key_violation (SQLSTATE 23503) as the foreign key did.
DO $$
DECLARE c RECORD;
BEGIN
    FOR c IN
        SELECT conname, conrelid::regclass::text AS rel FROM pg_constraint
        WHERE (contype = 'c' AND conrelid IN ('discord_delivery_intent'::regclass,
                'reach_turn'::regclass, 'reach_delivery'::regclass))
           OR (contype = 'f' AND (
            (conrelid = 'reach_turn'::regclass AND confrelid = 'discord_event_admission'::regclass)
            OR (conrelid = 'discord_delivery_intent'::regclass AND confrelid = 'reach_turn'::regclass)
            OR (conrelid = 'reach_delivery'::regclass AND confrelid = 'discord_delivery_intent'::regclass)))
    LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', c.rel, c.conname);
    END LOOP;
END;
$$;

-- Part k KNOWN_SENT opens part k+1 (versions 6 and 7), now looking before it inserts: an
-- INSERT ... SELECT that finds no part still sets up an insert into the intent (its indexes and
-- triggers), and nearly every answer has one part.
CREATE OR REPLACE FUNCTION intent_sent_opens_next_part_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM delivery_part WHERE turn_id = NEW.turn_id AND part_no = NEW.part_no + 1) THEN
        INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest,
            nonce, state, generation, created_at)
        SELECT p.intent_id, p.turn_id, p.part_no, NEW.seq + 1, p.effect, p.payload_digest, p.nonce,
            'PENDING', 0, p.recorded_at
        FROM delivery_part p WHERE p.turn_id = NEW.turn_id AND p.part_no = NEW.part_no + 1;
    END IF;
    RETURN NULL;
END;
$$;
