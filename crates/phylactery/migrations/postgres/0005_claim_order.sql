-- Phylactery ledger, version 5: the claim order as an index. `claim_next` takes the oldest
-- claimable intent (PENDING, or CLAIMED with a lapsed lease) by (created_at, intent_id); with
-- this index each branch reads one entry instead of every waiting intent, so a backlog of
-- thousands of PENDING intents no longer makes every claim scan and sort all of them.
CREATE INDEX intent_claim_order ON discord_delivery_intent (state, created_at, intent_id);
