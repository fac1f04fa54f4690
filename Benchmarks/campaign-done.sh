#!/usr/bin/env bash
# The campaigns' "done when", through the service's API alone, against one `salvo simulate` (HTTP/2, provider tokens):
#
#   Benchmarks/campaign-done.sh SALVO [ROWS]
#
# Two campaigns of the same ROWS rows (ROWS valid tokens from `salvo tokens generate`, then INVALID=10 rows that are
# not tokens; the simulator refuses a fraction of the valid ones with BadDeviceToken, --fault invalid-fraction=0.002):
# one whose audience is the CSV uploaded as the body, one whose audience is a query on PostgreSQL
# (`SELECT token FROM campaign_devices ORDER BY n`, the same rows loaded with \copy). Each is paced at RATE a second
# (ROWS / 15 by default), `kill -9`ed at a quarter and started again on its store, paused at half and resumed; then
# the simulator's ledger and the campaign's report are checked against `salvo send --journal` of the same rows
# (Benchmarks/campaign-done.py says what is compared). Prints each check; exits 1 when one fails.
#
# PostgreSQL: SALVO_TEST_POSTGRES_URL when set (a superuser's URL with its password, as .ci/run exports), else a
# throwaway cluster started here on a free loopback port (as .ci/run starts one; as root it runs as `postgres`). The
# service gets the URL without its password and the password in a file (--campaign-postgres-password-file). Needs
# python3, psql, openssl. Loopback only; throwaway folders, removed at exit; every wait is bounded.
set -euo pipefail
salvo=$(realpath "${1:?usage: campaign-done.sh SALVO [ROWS]}")
rows=${2:-100000}
rate=${RATE:-$(((rows + 14) / 15))}
invalid=${INVALID:-10}
topic=com.example.bench
here=$(cd "$(dirname "$0")" && pwd)
payload=$here/../data/payloads/bench-100.json
work=$(mktemp -d /tmp/salvo-campaign-done-XXXXXX)
export XDG_CACHE_HOME=$work/cache
simulators=()
simulator_options=(--fault invalid-fraction=0.002)
serve_pid=""
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
url=${SALVO_TEST_POSTGRES_URL:-}
if [ -z "$url" ]; then
    start_postgres done -c fsync=off
    url="postgres://salvo:$pgpassword@127.0.0.1:$pgport/postgres?sslmode=disable"
fi
psql=$(pg_bin psql)
# The service's URL has no password; the password is in a file only it and send read.
read -r service_url password < <(python3 -c '
import sys
from urllib.parse import urlsplit, urlunsplit
parts = urlsplit(sys.argv[1])
netloc = parts.username + "@" + parts.hostname + (f":{parts.port}" if parts.port else "")
print(urlunsplit(parts._replace(netloc=netloc)), parts.password)' "$url")
printf '%s\n' "$password" >"$work/postgres-password"
chmod 600 "$work/postgres-password"

"$salvo" tokens generate "$rows" --seed 42 --output "$work/tokens.csv" >/dev/null
cp "$work/tokens.csv" "$work/audience.csv"
for i in $(seq "$invalid"); do echo "not-a-token-$i" >>"$work/audience.csv"; done
"$psql" -X -q -v ON_ERROR_STOP=1 -d "$url" <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS campaign_devices;
CREATE TABLE campaign_devices (n bigserial PRIMARY KEY, token text NOT NULL);
\copy campaign_devices (token) FROM '$work/audience.csv' CSV HEADER
VACUUM ANALYZE campaign_devices;
SQL
cleanup=("$psql -X -q -d '$url' -c 'DROP TABLE IF EXISTS campaign_devices'" "${cleanup[@]}")

start_simulator 0
python3 "$here/campaign-done.py" --salvo "$salvo" --work "$work" --rows "$rows" --invalid "$invalid" --rate "$rate" \
    --control "$control" --control-token "$control_token" --tokens "$work/tokens.csv" --audience "$work/audience.csv" \
    --postgres-url "$service_url" --postgres-password-file "$work/postgres-password" \
    --query "SELECT token FROM campaign_devices ORDER BY n" --payload "$payload" -- "${credentials[@]}" --topic "$topic"
