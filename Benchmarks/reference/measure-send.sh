#!/usr/bin/env bash
# The whole `salvo send` process against the reference receiver, with the limit measured in the same run:
# the reference sender before and after it, for the same rows, frame size and connections.
#
#   Benchmarks/reference/measure-send.sh SALVO TOKENS.csv [CONNECTIONS] [PAYLOAD]
#
# e.g. Benchmarks/reference/measure-send.sh .build-release/release/salvo /tmp/t10m.csv 2
# SALVO runs with its default options plus a report and a rejects file (the unsettled file goes next to the
# report), under /usr/bin/time -v. Prints each program's line, then the ratio of salvo's start-to-exit rate to the
# better of the two limits, and salvo's CPU per row.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../.build/reference
salvo=${1:?usage: measure-send.sh SALVO TOKENS.csv [CONNECTIONS] [PAYLOAD]}
tokens=${2:?usage: measure-send.sh SALVO TOKENS.csv [CONNECTIONS] [PAYLOAD]}
connections=${3:-2}
payload=${4:-$here/../../data/payloads/bench-100.json}
make -s -C "$here" all certs
rows=$(($(wc -l <"$tokens") - 1)) # the header line `token`
frame_bytes=$((61 + $(wc -c <"$payload"))) # command 2: 61 bytes of fields and item headers around the payload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Starts a receiver that exits by itself once $rows frames arrived and its connections closed; sets $port.
start_receiver() {
    mkfifo "$work/port"
    "$out/reference-receiver" --cert "$out/server.pem" --key "$out/server-key.pem" --frames "$rows" \
        >"$work/port" 2>&1 &
    receiver=$!
    exec 3<"$work/port"
    rm "$work/port"
    read -r _ _ port <&3
}
stop_receiver() {
    wait "$receiver"
    cat <&3
    exec 3<&-
}

limit() {
    start_receiver
    "$out/reference-sender" --port "$port" --frames "$rows" --connections "$connections" \
        --frame-bytes "$frame_bytes" | tee -a "$work/limits"
    stop_receiver
}

limit
start_receiver
/usr/bin/time -v -o "$work/time" "$salvo" send "$tokens" --payload "$payload" --gateway "127.0.0.1:$port" \
    --cert "$out/client.pem" --key "$out/client-key.pem" --ca "$out/server.pem" --connections "$connections" \
    --report "$work/report.json" --rejects "$work/rejects.csv" --progress none | grep -E '^(delivered|time|result)'
stop_receiver
limit

wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$work/time")
user=$(awk -F': ' '/User time/ { print $2 }' "$work/time")
sys=$(awk -F': ' '/System time/ { print $2 }' "$work/time")
best=$(sed -n 's/.*frames_per_second=\([0-9]*\).*/\1/p' "$work/limits" | sort -n | tail -1)
awk -v rows="$rows" -v wall="$wall" -v user="$user" -v sys="$sys" -v best="$best" 'BEGIN {
    rate = rows / wall
    printf "salvo send: %d rows in %.2f s start to exit: %.2f M/s; CPU %.2f s user + %.2f s sys (%.3f µs user a row)\n",
        rows, wall, rate / 1e6, user, sys, user / rows * 1e6
    printf "limit (the better reference run): %.2f M/s; ratio %.3f\n", best / 1e6, rate / best
}'
