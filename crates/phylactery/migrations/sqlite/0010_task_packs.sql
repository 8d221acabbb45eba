-- Phylactery ledger, version 10, SQLite dialect: task-pack lifecycle and local bindings (issue
-- 27; `src/taskpack.rs` documents the rules). PostgreSQL's migration 12 is the same schema.
--
-- * `task_pack`: one row per pack name, its lifecycle state (INACTIVE until first activated,
--   ACTIVE, REVOKED), the version last activated, the activation generation and the highest
--   version ever installed (the rollback fence: an install must exceed it).
-- * `task_pack_version`: every installed version, inert and immutable.
-- * `task_pack_event`: every transition, append-only (no update, no delete); each event carries
--   the generation its pack has when it is written.
-- * `task_binding`: one local binding per pack, pinned to the generation, version and profile
--   digest it was bound or accepted at.
-- Raw-SQL guards: the lifecycle transition table, generations and the highest version never
-- decrease, identities never change, nothing is deleted, a binding's pin names an installed
-- version's profile digest at a generation the pack has reached. Every event bumps the vault's
-- commit sequence, so a vault restored from an older copy (a revoked pack active again) is a
-- detected rollback.

CREATE TABLE task_pack (
    name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 256),
    state TEXT NOT NULL CHECK (state IN ('INACTIVE', 'ACTIVE', 'REVOKED')),
    active_version INTEGER,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    highest_version INTEGER NOT NULL CHECK (highest_version >= 0),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    CHECK ((state = 'INACTIVE') = (active_version IS NULL)),
    CHECK ((state = 'INACTIVE') = (generation = 0)),
    CHECK (active_version IS NULL OR active_version <= highest_version),
    FOREIGN KEY (name, active_version) REFERENCES task_pack_version (name, version)
);

CREATE TABLE task_pack_version (
    name TEXT NOT NULL REFERENCES task_pack (name),
    version INTEGER NOT NULL CHECK (version >= 0),
    archive_digest TEXT NOT NULL CHECK (length(archive_digest) = 71),
    facts_digest TEXT NOT NULL CHECK (length(facts_digest) = 71),
    profile_digest TEXT NOT NULL CHECK (length(profile_digest) = 71),
    signer TEXT NOT NULL CHECK (length(signer) >= 1),
    expires_at_s INTEGER NOT NULL CHECK (expires_at_s >= 0),
    archive_path TEXT NOT NULL CHECK (length(archive_path) >= 1),
    installed_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE task_pack_event (
    event_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('installed', 'activated', 'upgraded', 'revoked',
        'reactivated', 'bound', 'binding-accepted', 'binding-carried', 'binding-paused',
        'binding-resumed')),
    generation INTEGER NOT NULL CHECK (generation >= 0),
    at_ms INTEGER NOT NULL,
    FOREIGN KEY (name, version) REFERENCES task_pack_version (name, version)
);
CREATE INDEX task_pack_event_by_name ON task_pack_event (name, event_id);

CREATE TABLE task_binding (
    pack TEXT PRIMARY KEY REFERENCES task_pack (name),
    workspace TEXT NOT NULL CHECK (length(workspace) >= 1),
    vm_backend TEXT NOT NULL CHECK (length(vm_backend) >= 1),
    model TEXT CHECK (model IS NULL OR length(model) >= 1),
    network TEXT NOT NULL CHECK (length(network) >= 1),
    hil TEXT NOT NULL CHECK (hil IN ('each-step', 'each-mutation')),
    max_concurrent_runs INTEGER NOT NULL CHECK (max_concurrent_runs BETWEEN 1 AND 4294967295),
    publication INTEGER NOT NULL CHECK (publication IN (0, 1)),
    paused INTEGER NOT NULL CHECK (paused IN (0, 1)),
    bound_generation INTEGER NOT NULL CHECK (bound_generation >= 1),
    bound_version INTEGER NOT NULL,
    bound_profile_digest TEXT NOT NULL,
    bound_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (pack, bound_version) REFERENCES task_pack_version (name, version)
);

-- The lifecycle table, as `PackState::activate` / `PackState::revoke` check it: an install
-- changes only the highest version; every other change is one transition that bumps the
-- generation by exactly one. The fences on decreasing values are separate triggers with
-- disjoint conditions, so each breach names its own code.
CREATE TRIGGER task_pack_identity BEFORE UPDATE ON task_pack
WHEN NEW.name IS NOT OLD.name OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;
CREATE TRIGGER task_pack_generation_monotonic BEFORE UPDATE ON task_pack
WHEN NEW.name IS OLD.name AND NEW.generation < OLD.generation
BEGIN
    SELECT RAISE(ABORT, 'package/generation-regressed');
END;
CREATE TRIGGER task_pack_highest_monotonic BEFORE UPDATE ON task_pack
WHEN NEW.name IS OLD.name AND NEW.generation >= OLD.generation
    AND NEW.highest_version < OLD.highest_version
BEGIN
    SELECT RAISE(ABORT, 'package/rollback');
END;
CREATE TRIGGER task_pack_transition BEFORE UPDATE ON task_pack
WHEN NEW.name IS OLD.name AND NEW.generation >= OLD.generation
    AND NEW.highest_version >= OLD.highest_version AND NOT (
    (NEW.state = OLD.state AND NEW.active_version IS OLD.active_version
        AND NEW.generation = OLD.generation)
    OR (NEW.generation = OLD.generation + 1 AND (
        (OLD.state = 'INACTIVE' AND NEW.state = 'ACTIVE')
        OR (OLD.state = 'ACTIVE' AND NEW.state = 'ACTIVE' AND NEW.active_version > OLD.active_version)
        OR (OLD.state = 'ACTIVE' AND NEW.state = 'REVOKED' AND NEW.active_version = OLD.active_version)
        OR (OLD.state = 'REVOKED' AND NEW.state = 'ACTIVE' AND NEW.active_version >= OLD.active_version)
    ))
)
BEGIN
    SELECT RAISE(ABORT, 'package/invalid-transition');
END;

-- An installed version exceeds every earlier one of its name and never changes.
CREATE TRIGGER task_pack_version_newer BEFORE INSERT ON task_pack_version
WHEN EXISTS (SELECT 1 FROM task_pack_version WHERE name = NEW.name AND version >= NEW.version)
BEGIN
    SELECT RAISE(ABORT, 'package/rollback');
END;
CREATE TRIGGER task_pack_version_immutable BEFORE UPDATE ON task_pack_version
BEGIN
    SELECT RAISE(ABORT, 'package/immutable');
END;

-- Events are insert-only, and each carries the generation its pack has when it is written
-- (written after the transition, in its transaction), so their generations never decrease.
CREATE TRIGGER task_pack_event_generation BEFORE INSERT ON task_pack_event
WHEN NEW.generation IS NOT (SELECT generation FROM task_pack WHERE name = NEW.name)
BEGIN
    SELECT RAISE(ABORT, 'package/event-generation');
END;
CREATE TRIGGER task_pack_event_immutable BEFORE UPDATE ON task_pack_event
BEGIN
    SELECT RAISE(ABORT, 'ledger/append-only');
END;

-- A binding is pinned to an installed version's profile digest at a generation the pack has
-- reached, and its pin never moves back.
CREATE TRIGGER task_binding_pin_insert BEFORE INSERT ON task_binding
WHEN NEW.bound_generation > (SELECT generation FROM task_pack WHERE name = NEW.pack)
    OR NEW.bound_profile_digest IS NOT (SELECT profile_digest FROM task_pack_version
        WHERE name = NEW.pack AND version = NEW.bound_version)
BEGIN
    SELECT RAISE(ABORT, 'local-binding/pin-mismatch');
END;
CREATE TRIGGER task_binding_identity BEFORE UPDATE ON task_binding
WHEN NEW.pack IS NOT OLD.pack OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'ledger/immutable-identity');
END;
CREATE TRIGGER task_binding_generation_monotonic BEFORE UPDATE ON task_binding
WHEN NEW.pack IS OLD.pack AND (NEW.bound_generation < OLD.bound_generation
    OR NEW.bound_version < OLD.bound_version)
BEGIN
    SELECT RAISE(ABORT, 'local-binding/generation-regressed');
END;
CREATE TRIGGER task_binding_pin_update BEFORE UPDATE ON task_binding
WHEN NEW.pack IS OLD.pack AND NEW.bound_generation >= OLD.bound_generation
    AND NEW.bound_version >= OLD.bound_version
    AND (NEW.bound_generation > (SELECT generation FROM task_pack WHERE name = NEW.pack)
        OR NEW.bound_profile_digest IS NOT (SELECT profile_digest FROM task_pack_version
            WHERE name = NEW.pack AND version = NEW.bound_version))
BEGIN
    SELECT RAISE(ABORT, 'local-binding/pin-mismatch');
END;

CREATE TRIGGER no_delete_task_pack BEFORE DELETE ON task_pack
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_task_pack_version BEFORE DELETE ON task_pack_version
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_task_pack_event BEFORE DELETE ON task_pack_event
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;
CREATE TRIGGER no_delete_task_binding BEFORE DELETE ON task_binding
BEGIN SELECT RAISE(ABORT, 'ledger/append-only'); END;

CREATE TRIGGER seq_task_pack_event AFTER INSERT ON task_pack_event
BEGIN UPDATE vault_commit_seq SET seq = seq + 1 WHERE singleton = 1; END;
