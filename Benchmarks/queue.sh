#!/usr/bin/env bash
# The service's queue through its store alone (`salvo-bench queue`), the embedded store beside PostgreSQL:
#
#   Benchmarks/queue.sh SALVO_BENCH [ROWS]
#
# RUNS (default 3) rounds, each of: the embedded store (SQLite) in a new folder; PostgreSQL with 1 worker; PostgreSQL
# with 2 workers (WORKERS, default "1 2"), each on a new database of one throwaway cluster started here (initdb and
# pg_ctl, a free loopback port, the server's default settings: fsync and synchronous_commit on; as root it runs as
# `postgres`). ROWS notifications a run (default 200000). Prints each run's output, then a table of the medians of
# each column over the runs; exits 1 when a run failed its check (every notification delivered). Needs python3 and
# PostgreSQL's initdb, pg_ctl and psql. Loopback only; the folder and the cluster are removed at exit.
set -euo pipefail
bench=$(realpath "${1:?usage: queue.sh SALVO_BENCH [ROWS]}")
rows=${2:-200000}
runs=${RUNS:-3}
workers_list=${WORKERS:-1 2}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/salvo-queue-XXXXXX)
cleanup=()
finish() {
    for c in "${cleanup[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap finish EXIT

# pg_bin, start_postgres.
. "$here/postgres-common.sh"
start_postgres queue
password=$pgpassword
port=$pgport
admin="postgres://salvo:$password@127.0.0.1:$port/postgres?sslmode=disable"
psql=$(pg_bin psql)
# The benchmark gets the URL without its password, and the password in a file.
cp "$work/pg/pwfile" "$work/password"
version=$("$psql" -X -At -d "$admin" -c 'SHOW server_version')
echo "PostgreSQL $version on 127.0.0.1:$port (fsync $("$psql" -X -At -d "$admin" -c 'SHOW fsync'), synchronous_commit" \
    "$("$psql" -X -At -d "$admin" -c 'SHOW synchronous_commit')); $rows notifications a run, $runs runs"

failed=0
: >"$work/results"
run_one() {
    local label=$1
    shift
    echo "== $label"
    local status=0
    "$bench" queue --rows "$rows" "$@" >"$work/out" 2>&1 || status=$?
    cat "$work/out"
    [ "$status" = 0 ] || {
        echo "(exit $status)"
        failed=1
    }
    local line
    line=$(grep '^result ' "$work/out" | tail -1 || true)
    [ -n "$line" ] && echo "$label ${line#result }" >>"$work/results"
    return 0
}
for run in $(seq "$runs"); do
    run_one "embedded,1" --store "$work/embedded-$run"
    rm -rf "$work/embedded-$run"
    for workers in $workers_list; do
        database="queue_${workers}_$run"
        "$psql" -X -q -d "$admin" -c "CREATE DATABASE $database"
        run_one "postgresql,$workers" --workers "$workers" --password-file "$work/password" \
            --store "postgres://salvo@127.0.0.1:$port/$database?sslmode=disable"
        "$psql" -X -q -d "$admin" -c "DROP DATABASE $database"
    done
done

python3 - "$work/results" "$rows" <<'PY'
import statistics
import sys

runs = {}
for line in open(sys.argv[1]):
    label, *pairs = line.split()
    runs.setdefault(label, []).append(dict(pair.split("=", 1) for pair in pairs))
columns = [
    ("seconds", "s", 2), ("accepted_per_s", "accepted/s", 0), ("claimed_per_s", "rows claimed/s", 0),
    ("claim_statements_per_s", "claim statements/s", 1), ("outcomes_per_s", "outcomes/s", 0),
    ("cycles_per_s", "cycles/s", 1), ("process_cpu_s", "process CPU s", 2), ("server_cpu_s", "server CPU s", 2),
]
def median(values):
    numbers = [float(v) for v in values if v not in ("-", None)]
    return statistics.median(numbers) if numbers else None
def shown(value, places):
    return "-" if value is None else f"{value:,.{places}f}"
print()
print(f"Medians of {len(next(iter(runs.values())))} runs of {int(sys.argv[2]):,} notifications each:")
print()
print("| store | workers | " + " | ".join(name for _, name, _ in columns)
      + " | process µs a notification | server µs a notification | WAL bytes a notification | checks |")
print("|---" * (len(columns) + 6) + "|")
for label, results in runs.items():
    store, workers = label.split(",")
    cells = [shown(median([r.get(key) for r in results]), places) for key, _, places in columns]
    rows = median([r["rows"] for r in results]) or 1
    process = median([r["process_cpu_s"] for r in results])
    server = median([r.get("server_cpu_s") for r in results])
    wal = median([r.get("wal_bytes_per_row") for r in results])
    passed = sum(r["check"] == "passed" for r in results)
    print(f"| {store} | {workers} | " + " | ".join(cells)
          + f" | {shown(process / rows * 1e6, 1)} | {shown(server and server / rows * 1e6, 1)}"
          + f" | {shown(wal, 0)} | {passed} of {len(results)} passed |")
PY
exit "$failed"
