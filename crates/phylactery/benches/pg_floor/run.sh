#!/usr/bin/env bash
# The PostgreSQL floor of issue 4's ledger benchmark, measured with pgbench (libpq, C): how far
# the chain's statements are from 25% of a bare insert when no Rust, no sqlx and no trigger is
# in the way. Four scripts, alternating in rounds, one client, prepared statements:
#
#   bare.sql               the bare single-row insert (synchronous commit), as the ledger bench;
#   bare_chain.sql         five bare inserts, the first and fourth synced: the chain's commit
#                          structure (admission, turn + intent, claim, SUBMITTING, settle) alone;
#   chain.sql              the chain's five statements as `src/{admission,turn,intent}.rs` issue
#                          them, on the shipped schema (every migration, every trigger);
#   chain_untriggered.sql  the same rows written by the same five statements with every trigger
#                          of the four chain tables disabled: each step's second row is written
#                          by a CTE instead, and the database checks no transition, fence, edge
#                          or row rule. Not a design: the floor of these rows and indexes.
#
# A step's durability is set with `SET synchronous_commit` before it (the vault uses two lanes of
# connections instead); the SETs are excluded from every sum, which is taken from pgbench's
# per-statement latencies (-r). Prints each script's µs per iteration and its ratio to the bare
# insert. Needs psql and pgbench and a server that lets the connecting role create databases;
# creates and drops two scratch databases. Keep chain.sql in step with the Rust statements.
#
#   PGHOST=/var/run/postgresql PGUSER=root bash crates/phylactery/benches/pg_floor/run.sh
#   REACH_FLOOR_ROUNDS (default 3), REACH_FLOOR_EVENTS (default 3000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
migrations="$here/../../migrations/postgres"
rounds=${REACH_FLOOR_ROUNDS:-3}
events=${REACH_FLOOR_EVENTS:-3000}
shipped=reach_floor_shipped
untriggered=reach_floor_untriggered

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
    psql_q -d postgres -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $shipped" -c "DROP DATABASE IF EXISTS $untriggered"
}
trap cleanup EXIT
cleanup
for db in "$shipped" "$untriggered"; do
    psql_q -d postgres -c "CREATE DATABASE $db"
    for f in "$migrations"/*.sql; do psql_q -d "$db" -f "$f" >/dev/null; done
    psql_q -d "$db" -c "CREATE TABLE bare (id BIGINT PRIMARY KEY, payload TEXT NOT NULL)"
done
for t in discord_event_admission reach_turn discord_delivery_intent reach_delivery; do
    psql_q -d "$untriggered" -c "ALTER TABLE $t DISABLE TRIGGER ALL"
done

# µs per iteration: the sum of the script's INSERT/UPDATE/WITH statements' mean latencies.
run() {
    pgbench -n -M prepared -r -t "$events" -f "$here/$1" "$2" 2>&1 | awk '
        /aborted/ { print "aborted: " $0 > "/dev/stderr"; exit 1 }
        /^ +[0-9.]+ +[0-9]+ +(INSERT|UPDATE|WITH)/ { s += $1 }
        END { printf "%.0f", s * 1000 }'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'; }

echo "pgbench floor, N=$events per script, $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
    bare=$(run bare.sql "$shipped")
    bare_chain=$(run bare_chain.sql "$shipped")
    chain=$(run chain.sql "$shipped")
    floor=$(run chain_untriggered.sql "$untriggered")
    echo "round $r: bare insert ${bare} µs | bare chain ${bare_chain} µs ($(pct "$bare" "$bare_chain")) |" \
        "chain untriggered ${floor} µs ($(pct "$bare" "$floor")) | chain shipped ${chain} µs ($(pct "$bare" "$chain"))"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
