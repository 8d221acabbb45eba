-- Phylactery ledger, version 12, PostgreSQL dialect: synced steps flush the WAL. Nothing the
-- database refused before is accepted now.
--
-- The ledger's one-statement writes run on connections whose `synchronous_commit` is off, and a
-- synced one was then followed by `SELECT txid_current()` on a synchronous connection, taken to
-- flush the WAL through its commit record. It does not: PostgreSQL flushes at commit only a
-- transaction that wrote WAL before its commit record (`RecordTransactionCommit`), and assigning
-- a transaction id writes none, so that commit was asynchronous too (`pg_stat_wal` counted 3
-- WAL syncs for 2,000 of them). Synced steps were durable only once the WAL writer came round,
-- within about 0.6 s; a server crash in that window could lose a SUBMITTING whose message had
-- been sent. Two ways to a real flush replace it:
--
-- * A flush (`backend::Pool::sync`) is a synchronous commit of a transactional logical message
--   (`pg_logical_emit_message`: no table, no row lock; a logical decoding consumer, if any,
--   sees an empty message with the prefix `reach.vault-sync`). The message takes a transaction id and writes a
--   WAL record, so the commit flushes the WAL through its commit record, which lies after every
--   earlier asynchronous commit; concurrent flushes are grouped by the server. It needs no
--   migration.
-- * `commit_synchronously_fn`: the update that moves an intent into SUBMITTING sets
--   `synchronous_commit` for its own transaction, so that commit is the flush (one round trip
--   for the step before any byte goes to Discord, not two). The setting is transaction-local;
--   the connection is asynchronous again for its next statement.
CREATE FUNCTION commit_synchronously_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN NEW;
END;
$$;
CREATE TRIGGER intent_submitting_commits_synchronously BEFORE UPDATE ON discord_delivery_intent
FOR EACH ROW WHEN (NEW.state = 'SUBMITTING' AND OLD.state IS DISTINCT FROM 'SUBMITTING')
EXECUTE FUNCTION commit_synchronously_fn();
