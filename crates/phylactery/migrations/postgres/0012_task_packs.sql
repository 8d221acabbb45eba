-- Phylactery ledger, version 12, PostgreSQL dialect: task-pack lifecycle and local bindings
-- (issue 27; `src/taskpack.rs` documents the rules). SQLite's migration 10 is the same schema.
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
-- version's profile digest at a generation the pack has reached. Every event advances the
-- vault's commit sequence, so a vault restored from an older copy (a revoked pack active
-- again) is a detected rollback. None of this is on the chain's hot path: plain CHECKs and
-- foreign keys.

CREATE TABLE task_pack (
    name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 256),
    state TEXT NOT NULL CHECK (state IN ('INACTIVE', 'ACTIVE', 'REVOKED')),
    active_version BIGINT,
    generation BIGINT NOT NULL CHECK (generation >= 0),
    highest_version BIGINT NOT NULL CHECK (highest_version >= 0),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CHECK ((state = 'INACTIVE') = (active_version IS NULL)),
    CHECK ((state = 'INACTIVE') = (generation = 0)),
    CHECK (active_version IS NULL OR active_version <= highest_version)
);

CREATE TABLE task_pack_version (
    name TEXT NOT NULL REFERENCES task_pack (name),
    version BIGINT NOT NULL CHECK (version >= 0),
    archive_digest TEXT NOT NULL CHECK (length(archive_digest) = 71),
    facts_digest TEXT NOT NULL CHECK (length(facts_digest) = 71),
    profile_digest TEXT NOT NULL CHECK (length(profile_digest) = 71),
    signer TEXT NOT NULL CHECK (length(signer) >= 1),
    expires_at_s BIGINT NOT NULL CHECK (expires_at_s >= 0),
    archive_path TEXT NOT NULL CHECK (length(archive_path) >= 1),
    installed_at BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);
ALTER TABLE task_pack ADD CONSTRAINT task_pack_active_installed
    FOREIGN KEY (name, active_version) REFERENCES task_pack_version (name, version);

CREATE TABLE task_pack_event (
    event_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('installed', 'activated', 'upgraded', 'revoked',
        'reactivated', 'bound', 'binding-accepted', 'binding-carried', 'binding-paused',
        'binding-resumed')),
    generation BIGINT NOT NULL CHECK (generation >= 0),
    at_ms BIGINT NOT NULL,
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
    max_concurrent_runs BIGINT NOT NULL CHECK (max_concurrent_runs BETWEEN 1 AND 4294967295),
    publication BIGINT NOT NULL CHECK (publication IN (0, 1)),
    paused BIGINT NOT NULL CHECK (paused IN (0, 1)),
    bound_generation BIGINT NOT NULL CHECK (bound_generation >= 1),
    bound_version BIGINT NOT NULL,
    bound_profile_digest TEXT NOT NULL,
    bound_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    FOREIGN KEY (pack, bound_version) REFERENCES task_pack_version (name, version)
);

-- The lifecycle table, as `PackState::activate` / `PackState::revoke` check it: an install
-- changes only the highest version; every other change is one transition that bumps the
-- generation by exactly one.
CREATE FUNCTION task_pack_transition_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name IS DISTINCT FROM OLD.name OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'ledger/immutable-identity';
    END IF;
    IF NEW.generation < OLD.generation THEN
        RAISE EXCEPTION 'package/generation-regressed';
    END IF;
    IF NEW.highest_version < OLD.highest_version THEN
        RAISE EXCEPTION 'package/rollback';
    END IF;
    IF NOT (
        (NEW.state = OLD.state AND NEW.active_version IS NOT DISTINCT FROM OLD.active_version
            AND NEW.generation = OLD.generation)
        OR (NEW.generation = OLD.generation + 1 AND (
            (OLD.state = 'INACTIVE' AND NEW.state = 'ACTIVE')
            OR (OLD.state = 'ACTIVE' AND NEW.state = 'ACTIVE' AND NEW.active_version > OLD.active_version)
            OR (OLD.state = 'ACTIVE' AND NEW.state = 'REVOKED' AND NEW.active_version = OLD.active_version)
            OR (OLD.state = 'REVOKED' AND NEW.state = 'ACTIVE' AND NEW.active_version >= OLD.active_version)
        ))
    ) THEN
        RAISE EXCEPTION 'package/invalid-transition';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_pack_transition BEFORE UPDATE ON task_pack
FOR EACH ROW EXECUTE FUNCTION task_pack_transition_fn();

-- An installed version exceeds every earlier one of its name and never changes. (Concurrent
-- installs of one name are serialized by the row lock of the `task_pack` upsert that precedes
-- the insert; this guard holds against a raw insert.)
CREATE FUNCTION task_pack_version_newer_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM task_pack_version WHERE name = NEW.name AND version >= NEW.version) THEN
        RAISE EXCEPTION 'package/rollback';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_pack_version_newer BEFORE INSERT ON task_pack_version
FOR EACH ROW EXECUTE FUNCTION task_pack_version_newer_fn();
CREATE FUNCTION task_pack_version_immutable_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'package/immutable';
END;
$$;
CREATE TRIGGER task_pack_version_immutable BEFORE UPDATE ON task_pack_version
FOR EACH ROW EXECUTE FUNCTION task_pack_version_immutable_fn();

-- Events are insert-only, and each carries the generation its pack has when it is written
-- (written after the transition, in its transaction), so their generations never decrease.
CREATE FUNCTION task_pack_event_generation_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.generation IS DISTINCT FROM (SELECT generation FROM task_pack WHERE name = NEW.name) THEN
        RAISE EXCEPTION 'package/event-generation';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_pack_event_generation BEFORE INSERT ON task_pack_event
FOR EACH ROW EXECUTE FUNCTION task_pack_event_generation_fn();
CREATE TRIGGER task_pack_event_immutable BEFORE UPDATE ON task_pack_event
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();

-- A binding is pinned to an installed version's profile digest at a generation the pack has
-- reached, and its pin never moves back.
CREATE FUNCTION task_binding_pin_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.pack IS DISTINCT FROM OLD.pack OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
            RAISE EXCEPTION 'ledger/immutable-identity';
        END IF;
        IF NEW.bound_generation < OLD.bound_generation OR NEW.bound_version < OLD.bound_version THEN
            RAISE EXCEPTION 'local-binding/generation-regressed';
        END IF;
    END IF;
    IF NEW.bound_generation > (SELECT generation FROM task_pack WHERE name = NEW.pack)
        OR NEW.bound_profile_digest IS DISTINCT FROM (SELECT profile_digest FROM task_pack_version
            WHERE name = NEW.pack AND version = NEW.bound_version) THEN
        RAISE EXCEPTION 'local-binding/pin-mismatch';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_binding_pin BEFORE INSERT OR UPDATE ON task_binding
FOR EACH ROW EXECUTE FUNCTION task_binding_pin_fn();

CREATE TRIGGER no_delete_task_pack BEFORE DELETE OR TRUNCATE ON task_pack
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_task_pack_version BEFORE DELETE OR TRUNCATE ON task_pack_version
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_task_pack_event BEFORE DELETE OR TRUNCATE ON task_pack_event
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();
CREATE TRIGGER no_delete_task_binding BEFORE DELETE OR TRUNCATE ON task_binding
FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only_fn();

CREATE TRIGGER seq_task_pack_event AFTER INSERT ON task_pack_event
FOR EACH STATEMENT EXECUTE FUNCTION vault_commit_seq_bump_fn();
