-- Duty Sigils: a Sigil minted for one duty (a purpose) on one subject (a delivery intent id)
-- rather than for a run, so a delivery can be reconciled after its task's Sigil expired. A duty
-- Sigil's `run_id` is `duty/<its own id>` (unique, never a run); `duty_subject` is what its
-- decisions' run ids must name. Like every Sigil it holds no secret.

ALTER TABLE sigil ADD COLUMN kind TEXT NOT NULL DEFAULT 'task' CHECK (kind IN ('task', 'duty'));
ALTER TABLE sigil ADD COLUMN duty_purpose TEXT
    CHECK ((kind = 'duty') = (duty_purpose IS NOT NULL));
ALTER TABLE sigil ADD COLUMN duty_subject TEXT
    CHECK ((kind = 'duty') = (duty_subject IS NOT NULL));

CREATE INDEX sigil_duty ON sigil (holder, duty_subject, duty_purpose) WHERE kind = 'duty';
