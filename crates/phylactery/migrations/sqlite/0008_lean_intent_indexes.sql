-- Phylactery ledger, version 8, SQLite dialect: two indexes fewer on the intent, as PostgreSQL's
-- migrations 8 and 9 did. Nothing the database refused before is accepted now.
--
-- * `intent_by_state` (state, lease_expires_at) is dropped: `intent_claim_order` (state,
--   created_at, intent_id) serves every query by state.
-- * `intent_by_lease_owner` is dropped: only tainted marking reads intents by lease owner, and
--   it asks for CLAIMED, SUBMITTING or UNKNOWN ones, which `intent_claim_order` (state first)
--   finds without it.
--
-- Each index on the intent is one more b-tree page every state change (claim, SUBMITTING,
-- settle) dirties, and every dirtied page is in the WAL flush a synced step waits for (issue 4's
-- benchmark).

DROP INDEX intent_by_state;
DROP INDEX intent_by_lease_owner;
