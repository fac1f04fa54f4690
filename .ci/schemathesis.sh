#!/usr/bin/env bash
# The service against its contract: `salvo serve --demo` on a free loopback port, then schemathesis over every
# operation of data/openapi/salvo-v1.json, with valid and invalid data, every check, a fixed seed. The server is
# stopped however this script exits; its log is kept in .build/schemathesis-server.log.
#
#   .ci/schemathesis.sh "$(swift build --show-bin-path)/salvo"
#
# schemathesis is installed into .build/schemathesis when missing (--target leaves the system's Python alone).
# Per-operation settings of the checks, and why: .ci/schemathesis.toml. SALVO_SCHEMATHESIS_EXAMPLES changes the number
# of test cases per operation (40).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH-TO-SALVO" >&2
    exit 64
fi
for needed in curl python3; do
    command -v "$needed" >/dev/null 2>&1 || { echo "$0 needs $needed" >&2; exit 1; }
done
salvo="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
document=data/openapi/salvo-v1.json
version=4.32.5
seed=20261129
# Test cases per operation and phase.
examples="${SALVO_SCHEMATHESIS_EXAMPLES:-40}"

tool=.build/schemathesis
if [ ! -d "$tool/schemathesis-$version.dist-info" ]; then
    rm -rf "$tool"
    python3 -m pip install --quiet --disable-pip-version-check --target "$tool" "schemathesis==$version"
fi

folder="$(mktemp -d /tmp/salvo-schemathesis-XXXXXX)"
log=.build/schemathesis-server.log
server=
tester=
stop_server() {
    if [ -n "$tester" ]; then
        kill -TERM "$tester" 2>/dev/null || true
        wait "$tester" 2>/dev/null || true
    fi
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        # The server settles for at most --shutdown-grace (10 s by default); then it is killed.
        for _ in $(seq 150); do
            kill -0 "$server" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$folder"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
mkdir -p .build
# The campaign files' folder holds the audience the document's example names, so that the example makes a campaign
# (and the operations on it are reached through the document's links).
mkdir -p "$folder/campaign-files/lists"
python3 - "$folder/campaign-files/lists/news.csv" <<'PYTHON'
import hashlib, sys
with open(sys.argv[1], "w") as out:
    out.write("token\n")
    for index in range(200):
        out.write(hashlib.sha256(f"schemathesis-{index}".encode()).hexdigest() + "\n")
PYTHON
"$salvo" serve --demo --listen "127.0.0.1:$port" --demo-key-file "$folder/key" --store "$folder/store" \
    --campaign-files "$folder/campaign-files" >"$log" 2>&1 &
server=$!

# Up within 60 s, its key written, or the log says why not.
deadline=$((SECONDS + 60))
until [ -s "$folder/key" ] && curl -sf -o /dev/null "$base/healthz"; do
    if ! kill -0 "$server" 2>/dev/null; then
        echo "salvo serve exited before it answered /healthz:" >&2
        cat "$log" >&2
        exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "salvo serve did not answer /healthz, or write its key, within 60 s:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.2
done
key="$(tr -d '\r\n' <"$folder/key")"

# The server serves the document it is tested against.
curl -sf "$base/openapi.json" >"$folder/served.json"
python3 - "$document" "$folder/served.json" <<'PYTHON'
import json, sys
with open(sys.argv[1]) as shipped, open(sys.argv[2]) as served:
    if json.load(shipped) != json.load(served):
        sys.exit(f"GET /openapi.json is not {sys.argv[1]}")
PYTHON

# In the background, waited for: a signal to this script then stops both at once (bash runs a trap only once the
# foreground command has ended).
PYTHONPATH="$tool${PYTHONPATH:+:$PYTHONPATH}" python3 -m schemathesis.cli --config-file .ci/schemathesis.toml \
    run "$document" --url "$base" --header "Authorization: Bearer $key" --checks all --mode all \
    --max-examples "$examples" --seed "$seed" --workers 1 --request-timeout 40 --no-shrink &
tester=$!
status=0
wait "$tester" || status=$?
tester=
[ "$status" = 0 ] || echo "the server's log: $log" >&2
exit "$status"
