\set n random(1, 4000000000000)
-- The chain's rows written with every trigger disabled, second rows by CTEs: a floor, not a design (see run.sh).
SET synchronous_commit = on;
WITH a AS (INSERT INTO discord_event_admission (admission_id, platform, adapter_revision, application_id, event_kind, external_event_id, payload_digest, habitat, admitted_at) VALUES ('adm_' || :n, 'discord', 'rev1', 'app1', 'MESSAGE_CREATE', 'ev' || :n, 'sha256-aaaa', 'hab', 1000) ON CONFLICT DO NOTHING RETURNING admission_id, admitted_at) INSERT INTO reach_turn (turn_id, admission_id, state, opened_at) SELECT 'turn_' || substr(admission_id, 5), admission_id, 'OPEN', admitted_at FROM a;
SET synchronous_commit = off;
WITH t AS (UPDATE reach_turn SET state = 'SUCCEEDED', answer_digest = 'sha256-bbbb', terminal_at = 1001 WHERE turn_id = 'turn_' || :n AND state = 'OPEN' RETURNING turn_id) INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest, nonce, state, generation, created_at) SELECT 'int_' || :n, turn_id, 1, 1, 'effect text', 'sha256-cccc', 'n' || :n, 'PENDING', 0, 1001 FROM t;
UPDATE discord_delivery_intent SET state='CLAIMED', generation = generation+1, lease_owner='core', lease_expires_at = 999999999 WHERE intent_id = 'int_' || :n AND (state='PENDING' OR (state='CLAIMED' AND lease_expires_at <= 1002)) RETURNING turn_id, generation, effect, payload_digest, nonce;
SET synchronous_commit = on;
UPDATE discord_delivery_intent SET state='SUBMITTING', submitting_at=1003 WHERE intent_id='int_' || :n AND state='CLAIMED' AND generation=1 AND lease_expires_at > 1003;
SET synchronous_commit = off;
WITH i AS (UPDATE discord_delivery_intent SET state = 'KNOWN_SENT', settled_at = 1004 WHERE intent_id = 'int_' || :n AND state='SUBMITTING' AND generation=1 RETURNING intent_id, effect, payload_digest, nonce, generation) INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation, platform_status, message_id, detail, settled_at) SELECT intent_id, 'KNOWN_SENT', effect, payload_digest, nonce, generation, 200, 'msg' || :n, NULL, 1004 FROM i;
