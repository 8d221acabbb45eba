-- Phylactery ledger, version 9, PostgreSQL dialect: two fewer index writes per chain.
--
-- * A turn is inserted OPEN by its admission and updated once, when it terminates; no indexed
--   column changes then (turn_id, admission_id), so the update can be HOT (no index entries,
--   less WAL) if the row's page has room. Pages of reach_turn are now filled to 70% by inserts,
--   leaving that room. Only pages written from now on are affected.
-- * `intent_by_lease_owner` is dropped: only tainted marking reads intents by lease owner, and
--   it asks for CLAIMED, SUBMITTING or UNKNOWN ones, which `intent_claim_order` (state first)
--   finds without it; every claim, SUBMITTING and settlement wrote an entry into it.
ALTER TABLE reach_turn SET (fillfactor = 70);
DROP INDEX intent_by_lease_owner;
