#!/usr/bin/env bash
# A campaign run by a fleet of `salvo serve` workers on one PostgreSQL, beside the same campaign on the embedded store
# and `salvo send --journal` of the same rows, in one run, against one `salvo simulate` (HTTP/2, provider tokens
# signed with the development key) on the same cores:
#
#   Benchmarks/fleet.sh SALVO [ROWS] [WORKERS...]        (defaults: 1000000 rows; 1 2 4 workers)
#
# - send: `salvo send TOKENS --journal DIR` (a fresh journal), start to exit (after a warm-up send: the simulator's
#   ledger grows its table on a first run).
# - the embedded store: one `salvo serve --store DIR` and one campaign, as Benchmarks/campaign.sh runs it.
# - for each N of WORKERS: a fresh database on a throwaway PostgreSQL cluster (`salvo serve migrate`), N workers
#   (`--worker-id wI`, a local folder and a listening port each; the same credentials, topic and 2 connections), all
#   sending to the one simulator, and one campaign of the ROWS rows (`salvo tokens generate ROWS --seed 42`, the
#   payload data/payloads/bench-100.json, unpaced) uploaded to worker 0; its audience is cut into partitions of
#   10,000 rows that the workers claim.
# A campaign is timed from its upload's start to the first `GET /v1/campaigns/{id}` that says `finished`, polled every
# POLL_MS (100) and given TIMEOUT seconds (900). Over each run Benchmarks/fleet.py takes the CPU seconds of the serve
# processes, of PostgreSQL (every process of the cluster) and of the simulator, and the machine's idle share; for a
# fleet, PostgreSQL's counters (statements by pg_stat_statements, transactions and tuples by pg_stat_database, WAL by
# pg_stat_wal, buffers written by pg_stat_bgwriter), printed per notification. Checks: every row delivered, the
# simulator's ledger holding each token once, every partition done; exits 1 when one fails.
#
# PostgreSQL keeps its default durability (fsync on, synchronous_commit on: what a fleet runs with), on this
# machine's disk; pg_stat_statements is loaded when the installation has it. As root the cluster runs as `postgres`.
# Needs python3, curl, initdb, pg_ctl, psql. Loopback only; throwaway folders, removed at exit; every wait is bounded.
set -euo pipefail
salvo=$(realpath "${1:?usage: fleet.sh SALVO [ROWS] [WORKERS...]}")
rows=${2:-1000000}
counts=("${@:3}")
[ ${#counts[@]} -eq 0 ] && counts=(1 2 4)
topic=com.example.bench
here=$(cd "$(dirname "$0")" && pwd)
payload=$here/../data/payloads/bench-100.json
work=$(mktemp -d /tmp/salvo-bench-fleet-XXXXXX)
export XDG_CACHE_HOME=$work/cache
simulators=()
cleanup=()
finish() {
    for pid in "${simulators[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    for c in "${cleanup[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap finish EXIT
# wait_line, start_simulator.
. "$here/serve-common.sh"

# pg_bin, start_postgres.
. "$here/postgres-common.sh"
statements=()
preload=""
if [ -e "$("$(pg_bin pg_config)" --pkglibdir)/pg_stat_statements.so" ]; then
    statements=(--statements)
    preload="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_utility=on"
fi
start_postgres fleet -c max_connections=200 $preload
url="postgres://salvo@127.0.0.1:$pgport/postgres?sslmode=disable"
# Only salvo and psql read the password, from a file of their own.
cp "$work/pg/pwfile" "$work/postgres-password"
chmod 600 "$work/postgres-password"
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
psql=$(pg_bin psql)
if [ ${#statements[@]} -gt 0 ]; then
    PGPASSWORD=$pgpassword "$psql" -X -q -v ON_ERROR_STOP=1 -d "$url" -c 'CREATE EXTENSION pg_stat_statements'
fi
echo "PostgreSQL $("$(pg_bin postgres)" --version | awk '{ print $3 }'), fsync $(PGPASSWORD=$pgpassword "$psql" -X -At \
    -d "$url" -c 'SHOW fsync'), synchronous_commit $(PGPASSWORD=$pgpassword "$psql" -X -At -d "$url" \
    -c 'SHOW synchronous_commit'), pg_stat_statements $([ ${#statements[@]} -gt 0 ] && echo loaded || echo absent)"

start_simulator 0
"$salvo" tokens generate "$rows" --seed 42 --output "$work/tokens.csv" >/dev/null
python3 "$here/fleet.py" --salvo "$salvo" --work "$work" --rows "$rows" --workers "${counts[*]}" \
    --tokens "$work/tokens.csv" --payload "$payload" --control "$control" --control-token "$control_token" \
    --simulator-pid "${simulators[0]}" --pg-url "$url" --pg-password-file "$work/postgres-password" \
    --postmaster-pid "$postmaster" --psql "$psql" --poll-ms "${POLL_MS:-100}" --timeout "${TIMEOUT:-900}" \
    "${statements[@]}" -- "${credentials[@]}" --topic "$topic"
