-- Phylactery ledger, version 4, PostgreSQL dialect: the NOT_ATTEMPTED delivery outcome.
-- ReachDelivery@1 returns NOT_ATTEMPTED, KNOWN_SENT, KNOWN_REJECTED or UNKNOWN (seed 001). A
-- claimed intent whose EgressDecision ward will never issue (the task's Sigil expired or was
-- revoked, a task budget is spent) is settled NOT_ATTEMPTED under its claim generation: no byte
-- was sent, and it is never claimed again.

-- The unnamed CHECK constraints of version 1 that NOT_ATTEMPTED must pass, found by definition.
DO $$
DECLARE c RECORD;
BEGIN
    FOR c IN
        SELECT conname, conrelid::regclass::text AS rel FROM pg_constraint
        WHERE contype = 'c'
          AND conrelid IN ('discord_delivery_intent'::regclass, 'reach_delivery'::regclass)
          AND (pg_get_constraintdef(oid) LIKE '%''UNKNOWN''%'
               OR pg_get_constraintdef(oid) LIKE '%submitting_at IS NOT NULL%')
          AND pg_get_constraintdef(oid) NOT LIKE '%message_id%'
    LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', c.rel, c.conname);
    END LOOP;
END;
$$;

ALTER TABLE discord_delivery_intent
    ADD CONSTRAINT intent_state_known CHECK (state IN ('PENDING', 'CLAIMED', 'SUBMITTING', 'KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN', 'NOT_ATTEMPTED')),
    ADD CONSTRAINT intent_submitted_when_sent CHECK (state IN ('PENDING', 'CLAIMED', 'NOT_ATTEMPTED') OR submitting_at IS NOT NULL),
    ADD CONSTRAINT intent_not_attempted_unsubmitted CHECK (state <> 'NOT_ATTEMPTED' OR submitting_at IS NULL);
ALTER TABLE reach_delivery
    ADD CONSTRAINT delivery_outcome_known CHECK (outcome IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN', 'NOT_ATTEMPTED')),
    ADD CONSTRAINT delivery_not_attempted_bare CHECK (outcome <> 'NOT_ATTEMPTED' OR (message_id IS NULL AND platform_status IS NULL AND detail IS NOT NULL));

-- The fence: a claim that can never be sent ends NOT_ATTEMPTED under its own generation.
CREATE OR REPLACE FUNCTION discord_delivery_intent_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.generation < OLD.generation OR NOT (
    (OLD.state = 'PENDING' AND NEW.state = 'CLAIMED')
    OR (OLD.state = 'CLAIMED' AND NEW.state IN ('CLAIMED', 'SUBMITTING'))
    OR (OLD.state = 'CLAIMED' AND NEW.state = 'NOT_ATTEMPTED' AND NEW.generation = OLD.generation)
    OR (OLD.state = 'SUBMITTING' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED', 'UNKNOWN') AND NEW.generation = OLD.generation)
    OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('KNOWN_SENT', 'KNOWN_REJECTED') AND NEW.generation = OLD.generation)
) THEN
        RAISE EXCEPTION 'intent/invalid-transition';
    END IF;
    RETURN NEW;
END;
$$;

-- A ReachDelivery@1 settles its intent in the same statement: from SUBMITTING under the
-- generation fence, or, for NOT_ATTEMPTED, from CLAIMED under the claim's generation.
CREATE OR REPLACE FUNCTION delivery_settles_intent_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE discord_delivery_intent SET state = NEW.outcome, settled_at = NEW.settled_at
    WHERE intent_id = NEW.intent_id AND generation = NEW.claim_generation
        AND state = CASE WHEN NEW.outcome = 'NOT_ATTEMPTED' THEN 'CLAIMED' ELSE 'SUBMITTING' END;
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM discord_delivery_intent
        WHERE intent_id = NEW.intent_id AND state = NEW.outcome AND generation = NEW.claim_generation
    ) THEN
        RAISE EXCEPTION 'ledger/stale-generation';
    END IF;
    RETURN NULL;
END;
$$;
