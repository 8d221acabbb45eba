-- Phylactery ledger, version 8, SQLite dialect: one index fewer on the intent, as PostgreSQL's
-- migration 8 did. Nothing the database refused before is accepted now.
--
-- `intent_by_state` (state, lease_expires_at) is dropped: `intent_claim_order` (state,
-- created_at, intent_id) serves every query by state, and the states those queries filter on
-- (PENDING, CLAIMED, SUBMITTING) hold only in-flight intents. Each index on the intent is one
-- more b-tree page every state change (claim, SUBMITTING, settle) dirties, and every dirtied
-- page is in the WAL flush a synced step waits for (issue 4's benchmark, same-run A/B: 4-8%
-- more chains per second sequentially, SUBMITTING 264-334 -> 225-255 us).

DROP INDEX intent_by_state;
