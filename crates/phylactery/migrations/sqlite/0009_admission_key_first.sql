-- Phylactery ledger, version 9, SQLite dialect: one index fewer on the admission, as
-- PostgreSQL's migration 11 does. Nothing the database refused before is accepted now.
--
-- The admission key's unique index now leads with `external_event_id`, so it also serves
-- `reach trail <event>` (a lookup by external event id alone), and `admission_by_external_event`,
-- which served only that lookup, is gone. Every admission wrote four b-trees (the row, its
-- primary key, the key and that index); it writes three. Each is a page the admission's flush
-- carries, and the admission is flushed before the edge is answered.
--
-- SQLite cannot change a table's constraint in place, so the table is rebuilt by the
-- documented procedure (https://sqlite.org/lang_altertable.html#otheralter), as migration 4
-- rebuilt the intent: the runner has foreign keys off and `legacy_alter_table` on, so the
-- rename leaves `reach_turn` and `admission_security_fault` referencing the table by name, and
-- it checks `PRAGMA foreign_key_check` before committing. Dropping the old table drops its
-- triggers (an implicit delete that fires none of them); they are created again unchanged.

CREATE TABLE discord_event_admission_v9 (
    admission_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    adapter_revision TEXT NOT NULL,
    application_id TEXT NOT NULL,
    event_kind TEXT NOT NULL,
    external_event_id TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    habitat TEXT NOT NULL,
    admitted_at INTEGER NOT NULL,
    UNIQUE (external_event_id, platform, adapter_revision, application_id, event_kind)
);
INSERT INTO discord_event_admission_v9 (admission_id, platform, adapter_revision, application_id,
    event_kind, external_event_id, payload_digest, habitat, admitted_at)
SELECT admission_id, platform, adapter_revision, application_id, event_kind, external_event_id,
    payload_digest, habitat, admitted_at
FROM discord_event_admission ORDER BY rowid;
DROP TABLE discord_event_admission;
ALTER TABLE discord_event_admission_v9 RENAME TO discord_event_admission;

CREATE TRIGGER discord_event_admission_immutable BEFORE UPDATE ON discord_event_admission
BEGIN
    SELECT RAISE(ABORT, 'admission/immutable');
END;
CREATE TRIGGER no_delete_admission BEFORE DELETE ON discord_event_admission
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER seq_admission AFTER INSERT ON discord_event_admission
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
CREATE TRIGGER admission_opens_turn AFTER INSERT ON discord_event_admission
BEGIN
    INSERT INTO reach_turn (turn_id, admission_id, state, opened_at)
    VALUES ('turn_' || substr(NEW.admission_id, 5), NEW.admission_id, 'OPEN', NEW.admitted_at);
END;
