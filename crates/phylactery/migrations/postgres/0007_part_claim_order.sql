-- Phylactery ledger, version 7, PostgreSQL dialect: a later part keeps its answer's place in the
-- claim order. `claim_next` takes the oldest claimable intent by (created_at, intent_id); part
-- k+1's intent now carries the time its part was committed with the turn (`delivery_part`'s
-- `recorded_at`) instead of the time part k settled, so under a backlog the rest of an answer
-- already half in the channel goes before answers formed after it, rather than behind them.
CREATE OR REPLACE FUNCTION intent_sent_opens_next_part_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest,
        nonce, state, generation, created_at)
    SELECT p.intent_id, p.turn_id, p.part_no, NEW.seq + 1, p.effect, p.payload_digest, p.nonce,
        'PENDING', 0, p.recorded_at
    FROM delivery_part p WHERE p.turn_id = NEW.turn_id AND p.part_no = NEW.part_no + 1;
    RETURN NULL;
END;
$$;
