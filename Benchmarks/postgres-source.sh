#!/usr/bin/env bash
# `salvo send --from-postgres` against `salvo send FILE.csv` for the same rows, measured in the same run: each job
# start to exit (wall clock), alternately, RUNS times each; prints
# every run, the medians and their ratio (PostgreSQL / CSV). The sink is the simulator (`salvo simulate`), or the
# reference receiver with SINK=reference.
#
#   Benchmarks/postgres-source.sh SALVO [ROWS] [RUNS]
#
# e.g. Benchmarks/postgres-source.sh .build-release/release/salvo 1000000 3
# The server is SALVO_TEST_POSTGRES_URL when set (a superuser's URL, as .ci/run exports), else a throwaway cluster
# started here on a free loopback port and removed at exit (initdb refuses root: then it runs as `postgres`). The
# table is `bench_devices(id, token, lang)`, the CSV its `\copy … CSV HEADER` export; the query reads the same columns
# in the same order: a campaign's query, `SELECT token, lang FROM bench_devices` (the table's order), or with
# ORDER=id `… ORDER BY id` (an index scan, which costs the server about a third more).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../.build/reference
salvo=${1:?usage: postgres-source.sh SALVO [ROWS] [RUNS]}
rows=${2:-1000000}
runs=${3:-3}
connections=2
payload=$here/../data/payloads/bench-100.json
[ "${SINK:-simulator}" = reference ] && make -s -C "$here/reference" all certs
work=$(mktemp -d /tmp/salvo-bench-postgres-XXXXXX)
cleanup=("rm -rf $work")
trap 'for c in "${cleanup[@]}"; do eval "$c" >/dev/null 2>&1 || true; done' EXIT

pg_bin() { command -v "$1" 2>/dev/null || find /usr/lib/postgresql -path "*/bin/$1" 2>/dev/null | sort -V | tail -1; }
url=${SALVO_TEST_POSTGRES_URL:-}
if [ -z "$url" ]; then
    mkdir "$work/pg" "$work/pg/sockets"
    printf 'bench\n' >"$work/pg/pwfile"
    as=()
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres:postgres "$work/pg"
        as=(runuser -u postgres --)
    fi
    "${as[@]}" "$(pg_bin initdb)" -D "$work/pg/data" -U salvo --pwfile "$work/pg/pwfile" --auth-host scram-sha-256 \
        --auth-local trust -E UTF8 --no-sync >/dev/null
    pgport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as[@]}" "$(pg_bin pg_ctl)" -D "$work/pg/data" -l "$work/pg/log" -w start \
        -o "-p $pgport -k $work/pg/sockets -c listen_addresses=127.0.0.1 -c fsync=off" >/dev/null
    cleanup=("${as[*]} $(pg_bin pg_ctl) -D $work/pg/data -m fast -w stop" "${cleanup[@]}")
    url="postgres://salvo:bench@127.0.0.1:$pgport/postgres?sslmode=disable"
fi
query="SELECT token, lang FROM bench_devices${ORDER:+ ORDER BY $ORDER}"
psql -X -q -v ON_ERROR_STOP=1 -d "$url" <<SQL
DROP TABLE IF EXISTS bench_devices;
CREATE TABLE bench_devices AS
  SELECT i AS id, md5(i::text) || md5((i + 1000000000)::text) AS token, CASE WHEN i % 3 = 0 THEN 'fr' ELSE 'en' END AS lang
  FROM generate_series(1, $rows) AS i;
ALTER TABLE bench_devices ADD PRIMARY KEY (id);
VACUUM ANALYZE bench_devices;
\copy ($query) TO '$work/tokens.csv' CSV HEADER
SQL

# The sink: the simulator (`salvo simulate`, the default: its TLS, validation and ledger, on the same two cores) or,
# with SINK=reference, the reference receiver (the fastest sink, that only decrypts and counts frames).
sink=${SINK:-simulator}
if [ "$sink" = simulator ]; then
    "$salvo" simulate --gateway-port 0 --feedback-port 0 --certificates "$work/certs" >"$work/simulator.txt" 2>&1 &
    simulator=$!
    cleanup=("kill $simulator" "${cleanup[@]}")
    for _ in $(seq 300); do grep -q '^  gateway' "$work/simulator.txt" && break; sleep 0.1; done
    port=$(awk '/^  gateway/ { split($2, a, ":"); print a[2] }' "$work/simulator.txt")
    credentials=(--cert "$(awk '/^  client/ { print $2 }' "$work/simulator.txt")"
        --key "$(awk '/^  key/ { print $2 }' "$work/simulator.txt")"
        --ca "$(awk '/^  CA/ { print $2 }' "$work/simulator.txt")")
else
    credentials=(--cert "$out/client.pem" --key "$out/client-key.pem" --ca "$out/server.pem")
fi
start_sink() {
    [ "$sink" = simulator ] && return
    mkfifo "$work/port"
    "$out/reference-receiver" --cert "$out/server.pem" --key "$out/server-key.pem" --frames "$rows" \
        >"$work/port" 2>&1 &
    receiver=$!
    exec 3<"$work/port"
    rm "$work/port"
    read -r _ _ port <&3
}
stop_sink() {
    [ "$sink" = simulator ] && return
    wait "$receiver"
    cat <&3 >/dev/null
    exec 3<&-
}
# One job, start to exit; appends its wall seconds to $work/$1 (a warm-up with kind `-` is not counted).
run() {
    local kind=$1
    shift
    start_sink
    /usr/bin/time -f %e -o "$work/time" "$salvo" send "$@" --payload "$payload" --gateway "127.0.0.1:$port" \
        "${credentials[@]}" --connections "$connections" --report "$work/report.json" --quiet >/dev/null
    stop_sink
    python3 - "$work/report.json" "$rows" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
delivered = report.get("confirmed", 0) + report.get("presumed", 0)
if delivered != int(sys.argv[2]):
    sys.exit(f"delivered {delivered} of {sys.argv[2]}")
PY
    [ "$kind" = - ] && return
    printf '%-8s %s s\n' "$kind" "$(cat "$work/time")"
    cat "$work/time" >>"$work/$kind"
}
# The simulator's ledger grows its table on a first run: a warm-up run before the measured ones.
run - "$work/tokens.csv"
for _ in $(seq "$runs"); do
    run csv "$work/tokens.csv"
    PGPASSWORD= run postgres --from-postgres "$url" --query "$query"
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
csv=$(median "$work/csv")
pg=$(median "$work/postgres")
awk -v rows="$rows" -v csv="$csv" -v pg="$pg" 'BEGIN {
    printf "%d rows: CSV file %.2f s (%.2f M/s), PostgreSQL query %.2f s (%.2f M/s); ratio %.2f\n",
        rows, csv, rows / csv / 1e6, pg, rows / pg / 1e6, pg / csv
}'
