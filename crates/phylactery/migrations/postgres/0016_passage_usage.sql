-- Phylactery ledger, version 16, PostgreSQL dialect: what a passage cost (issue 31 item 4).
-- SQLite's migration 14 is the same schema.
--
-- * `room_passages.prompt_tokens`, `completion_tokens`: the runtime's `usage` of the one call,
--   NULL when it did not say (or the passage never reached it); `wall_ms`: request sent to
--   answer read. Written with the settlement, so once: the `room_passage_settle` trigger
--   refuses any later update of a settled passage, and a replay infers nothing again.

ALTER TABLE room_passages ADD COLUMN prompt_tokens BIGINT
    CHECK (prompt_tokens IS NULL OR prompt_tokens >= 0);
ALTER TABLE room_passages ADD COLUMN completion_tokens BIGINT
    CHECK (completion_tokens IS NULL OR completion_tokens >= 0);
ALTER TABLE room_passages ADD COLUMN wall_ms BIGINT
    CHECK (wall_ms IS NULL OR wall_ms >= 0);
