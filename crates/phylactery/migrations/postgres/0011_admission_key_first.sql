-- Phylactery ledger, version 11, PostgreSQL dialect: one index fewer on the admission, as
-- SQLite's migration 9 does. Nothing the database refused before is accepted now.
--
-- The admission key's unique index now leads with `external_event_id`, so it also serves
-- `reach trail <event>` (a lookup by external event id alone), and `admission_by_external_event`,
-- which served only that lookup, is gone: every admission maintains two indexes (primary key,
-- key) instead of three. The key constraint's generated name is looked up, not assumed.

DO $$
DECLARE
    key_name TEXT;
BEGIN
    SELECT conname INTO STRICT key_name FROM pg_constraint
    WHERE conrelid = 'discord_event_admission'::regclass AND contype = 'u';
    EXECUTE format('ALTER TABLE discord_event_admission DROP CONSTRAINT %I', key_name);
END
$$;
ALTER TABLE discord_event_admission ADD CONSTRAINT discord_event_admission_key
    UNIQUE (external_event_id, platform, adapter_revision, application_id, event_kind);
DROP INDEX admission_by_external_event;
