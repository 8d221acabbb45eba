\set n random(1, 4000000000000)
-- One chain of the ledger bench as pgbench runs it (see run.sh); :n names the event.
SET synchronous_commit = on;
INSERT INTO discord_event_admission (admission_id, platform, adapter_revision, application_id, event_kind, external_event_id, payload_digest, habitat, admitted_at) VALUES ('adm_' || :n, 'discord', 'rev1', 'app1', 'MESSAGE_CREATE', 'ev' || :n, 'sha256-aaaa', 'hab', 1000) ON CONFLICT DO NOTHING;
SET synchronous_commit = off;
INSERT INTO turn_commit (turn_id, outcome, reason, answer_digest, terminal_at, intent_id, effect, payload_digest, nonce, part_no) VALUES ('turn_' || :n, 'SUCCEEDED', NULL, 'sha256-bbbb', 1001, 'int_' || :n, 'effect text', 'sha256-cccc', 'n' || :n, 1);
UPDATE discord_delivery_intent SET state='CLAIMED', generation = generation+1, lease_owner='core', lease_expires_at = 999999999 WHERE intent_id = 'int_' || :n AND (state='PENDING' OR (state='CLAIMED' AND lease_expires_at <= 1002)) RETURNING turn_id, generation, effect, payload_digest, nonce;
SET synchronous_commit = on;
UPDATE discord_delivery_intent SET state='SUBMITTING', submitting_at=1003 WHERE intent_id='int_' || :n AND state='CLAIMED' AND generation=1 AND lease_expires_at > 1003;
SET synchronous_commit = off;
INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation, platform_status, message_id, detail, settled_at) SELECT intent_id, 'KNOWN_SENT', effect, payload_digest, nonce, generation, 200, 'msg' || :n, NULL, 1004 FROM discord_delivery_intent WHERE intent_id = 'int_' || :n AND state='SUBMITTING' AND generation=1;
