#!/usr/bin/env bash
# `salvo serve` beside `salvo send` of the same rows, measured in the same run, against `salvo simulate` (HTTP/2,
# provider tokens) on the same cores:
# - send: `salvo send` of ROWS generated tokens, start to exit (wall clock), 2 connections;
# - the service: `salvo serve` on a fresh store (2 connections, warmed by one notification), then the same number
#   of notifications posted by wrk (Benchmarks/service-load.lua: 2 threads, CLIENTS connections, every
#   notification to a token of its own) in requests of 1, 100 and 1000, timed from wrk's start to the moment the
#   simulator's ledger holds every accepted notification (polled through its control endpoint every 50 ms while
#   requests are answered, every 5 ms after); requests of 1 carry ROWS / 10 notifications (SINGLE_ROWS);
# - latency: one notification a request at a fixed RATE a second for DURATION seconds (Benchmarks/service-latency.go
#   when Go is installed, Debian's golang-go: a goroutine a request, so that the client's own delay stays out of the
#   figure; else Benchmarks/service-client.py; both open loop), the time from each request to the push service's
#   answer (`answered_at` of each notification, read afterwards), p50 and p99, with the simulator holding every byte
#   0 and 50 ms each way (LATENCIES; empty: none).
# Prints every run, the medians and each service rate as a ratio to send's.
#
#   Benchmarks/service.sh SALVO [ROWS] [RUNS]
#
# e.g. Benchmarks/service.sh .build/release/salvo 200000 3
# PERF=FILE records the serve process (perf record -g) during the first run's requests of 100; TIMELINE=DIR writes
# the ledger's count once a second of each service run there; BATCHES="1 100 1000" chooses the request sizes.
# Needs wrk (Debian's) and python3. Loopback only; throwaway folders; every wait is bounded.
set -euo pipefail
salvo=$(realpath "${1:?usage: service.sh SALVO [ROWS] [RUNS]}")
rows=${2:-200000}
runs=${3:-3}
single=${SINGLE_ROWS:-$((rows / 10))}
rate=${RATE:-1000}
duration=${DURATION:-20}
latencies=${LATENCIES-0 50}
clients=${CLIENTS:-16}
perf_file=${PERF:-}
timeline=${TIMELINE:-}
batches=${BATCHES:-1 100 1000}
connections=2
topic=com.example.bench
here=$(cd "$(dirname "$0")" && pwd)
payload=$here/../data/payloads/bench-100.json
client=$here/service-client.py
lua=$here/service-load.lua
for n in "$rows" "$single"; do
    [ $((n % 2000)) = 0 ] || { echo "ROWS and SINGLE_ROWS are multiples of 2000 (got $n)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/salvo-bench-service-XXXXXX)
export XDG_CACHE_HOME=$work/cache
simulators=()
serve_pid=""
perf_pid=""
serves=0
finish() {
    [ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
    for pid in "${simulators[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap finish EXIT
# wait_line, start_simulator, stop_serve, median.
. "$here/serve-common.sh"

# `salvo serve` on a fresh store, warmed by one notification; sets serve_pid, url and key.
start_serve() {
    local store=$work/salvo-store
    rm -rf "$store"
    key=$("$salvo" serve keys create --store "$store" --name bench | awk '/^key:/ { print $2 }')
    # A file of its own each time: the last one's line must not be read before the shell truncates it.
    serves=$((serves + 1))
    local out=$work/serve-$serves.txt
    "$salvo" serve --listen 127.0.0.1:0 --store "$store" "${credentials[@]}" --no-proxy --topic "$topic" \
        --connections "$connections" >"$out" 2>"$work/serve.log" &
    serve_pid=$!
    wait_line "$out" 'listening on' "$serve_pid"
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$out")
    python3 "$client" warm --url "$url" --key "$key"
}

start_simulator 0
"$salvo" tokens generate "$rows" --seed 42 --output "$work/tokens.csv" >/dev/null
send() {
    python3 "$client" reset "$control" "$control_token"
    /usr/bin/time -f %e -o "$work/time" "$salvo" send "$work/tokens.csv" --payload "$payload" --protocol h2 \
        --topic "$topic" --push-type alert "${credentials[@]}" --no-proxy --connections "$connections" \
        --report "$work/report.json" --quiet >/dev/null
    python3 - "$work/report.json" "$rows" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
delivered = report.get("confirmed", 0) + report.get("presumed", 0)
if delivered != int(sys.argv[2]):
    sys.exit(f"send: delivered {delivered} of {sys.argv[2]}")
PY
}
# The simulator's ledger grows its table on a first run: a warm-up send before the measured ones.
send

echo "$rows rows, $runs runs; requests of 1 carry $single notifications; wrk: 2 threads, $clients connections"
for run in $(seq "$runs"); do
    send
    seconds=$(cat "$work/time")
    echo "$seconds" >>"$work/send"
    awk -v s="$seconds" -v n="$rows" 'BEGIN { printf "run %d  send            %7d rows  %6.2f s  %7.0f/s\n", '"$run"', n, s, n / s }'
    for batch in $batches; do
        notifications=$rows
        [ "$batch" = 1 ] && notifications=$single
        start_serve
        if [ -n "$perf_file" ] && [ "$batch" = 100 ] && [ "$run" = 1 ]; then
            perf record -F 499 -g -p "$serve_pid" -o "$perf_file" >/dev/null 2>&1 &
            perf_pid=$!
            sleep 0.5
        fi
        line=$(python3 "$client" throughput --url "$url" --key "$key" --control "$control" \
            --control-token "$control_token" --batch "$batch" --notifications "$notifications" --payload "$payload" \
            --lua "$lua" --connections "$clients" --phase $((run * 10000 + batch)) --timeout 300 --serve-pid "$serve_pid" \
            ${timeline:+--timeline "$timeline/run$run-batch$batch.txt"})
        if [ -n "$perf_pid" ]; then
            kill -INT "$perf_pid"
            wait "$perf_pid" || true
            perf_pid=""
        fi
        stop_serve
        # delivered S answered S accepted N refused N repeated N ledger N requests-p50 MS requests-p99 MS
        read -r _ delivered _ answered _ accepted _ refused _ repeated _ ledger _ p50 _ p99 <<<"$line"
        echo "$notifications $delivered" >>"$work/service-$batch"
        awk -v b="$batch" -v n="$notifications" -v d="$delivered" -v a="$answered" -v s="$seconds" -v r="$rows" \
            -v p50="$p50" -v p99="$p99" 'BEGIN {
            printf "run %d  service, %4d a request %7d notifications  %6.2f s  %7.0f/s delivered (all answered 202 at %.2f s; request p50 %s ms, p99 %s ms)  ratio to send %.3f\n",
                '"$run"', b, n, d, n / d, a, p50, p99, (n / d) / (r / s)
        }'
        if [ "$refused" != 0 ] || [ "$accepted" != "$notifications" ] || [ "$repeated" != 0 ] \
            || [ "$ledger" != "$notifications" ]; then
            echo "  !! accepted $accepted of $notifications, refused $refused, ledger $ledger, repeated tokens $repeated" >&2
        fi
    done
done

echo
send_median=$(median "$work/send")
awk -v s="$send_median" -v n="$rows" 'BEGIN { printf "median  send            %7d rows  %6.2f s  %7.0f/s\n", n, s, n / s }'
for batch in $batches; do
    n=$(head -1 "$work/service-$batch" | cut -d' ' -f1)
    cut -d' ' -f2 "$work/service-$batch" >"$work/service-$batch.seconds"
    awk -v b="$batch" -v n="$n" -v d="$(median "$work/service-$batch.seconds")" -v s="$send_median" -v r="$rows" 'BEGIN {
        printf "median  service, %4d a request %7d notifications  %6.2f s  %7.0f/s  ratio to send %.3f%s\n",
            b, n, d, n / d, (n / d) / (r / s), (b == 100) ? ((n / d) / (r / s) >= 0.5 ? " (goal >= 0.5: met)" : " (goal >= 0.5: not met)") : ""
    }'
done

echo
latency_client=(python3 "$client" latency)
if [ -n "$latencies" ] && command -v go >/dev/null 2>&1; then
    GOCACHE=$work/go-cache GOPATH=$work/go go build -o "$work/service-latency" "$here/service-latency.go"
    latency_client=("$work/service-latency")
fi
for latency in $latencies; do
    [ "$latency" != 0 ] && start_simulator "$latency"
    start_serve
    echo "latency: the simulator $latency ms each way (round trip $((2 * latency)) ms; goal p99 <= $((2 * latency + 10)) ms), $rate notifications/s for $duration s, one a request"
    echo "  client: ${latency_client[*]##*/}"
    "${latency_client[@]}" --url "$url" --key "$key" --payload "$payload" --rate "$rate" --seconds "$duration" \
        --phase "$latency" | tee "$work/latency-$latency"
    # The service's own view of its 202s (its request histogram, from the request's arrival to its answer): what the
    # client's timing adds besides (its scheduling on the same two cores) shows against "the 202" above.
    curl -s --max-time 10 "$url/metrics" | awk '
        /^salvo_service_request_seconds_bucket\{route="\/v1\/notifications",status="202"/ {
            match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n[le] = $2; if (le == "+Inf") total = $2 }
        END { if (total > 0) printf "  the service'"'"'s 202s: %.2f%% within 5 ms, %.2f%% within 10 ms, %.2f%% within 25 ms (%d)\n",
            100 * n["0.005"] / total, 100 * n["0.01"] / total, 100 * n["0.025"] / total, total }'
    stop_serve
    awk -v goal=$((2 * latency + 10)) '/^request to answer/ { printf "  p99 %s ms: goal %s\n", $8, ($8 + 0 <= goal) ? "met" : "not met" }' \
        "$work/latency-$latency"
done
