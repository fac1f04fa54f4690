# What Benchmarks/service.sh and Benchmarks/campaign.sh share, sourced by both: they set `salvo`, `work`, `topic`,
# `simulators` (an array) and `serve_pid` first.

# Waits up to 30 s for a line matching PATTERN in FILE while PID lives.
wait_line() {
    for _ in $(seq 300); do
        grep -q "$2" "$1" 2>/dev/null && return
        kill -0 "$3" 2>/dev/null || break
        sleep 0.1
    done
    echo "no '$2' in $1:" >&2
    cat "$1" >&2
    exit 1
}

# A simulator with its own certificates and signing key (and the options in the array simulator_options, when the
# script sets one); sets control, control_token and credentials.
start_simulator() {
    local folder=$work/simulator-$1 latency=()
    [ "$1" != 0 ] && latency=(--latency-ms "$1")
    mkdir -p "$folder"
    "$salvo" simulate --gateway-port 0 --feedback-port 0 --h2-port 0 --control-port 0 --topic "$topic" \
        --certificates "$folder/certs" "${latency[@]}" ${simulator_options[@]+"${simulator_options[@]}"} \
        >"$folder/simulator.txt" 2>&1 &
    simulators+=($!)
    wait_line "$folder/simulator.txt" '^  control' $!
    local port
    port=$(awk '/^  http2/ { split($2, a, ":"); print a[2] }' "$folder/simulator.txt")
    control=$(awk '/^  control/ { sub(",", "", $2); print $2 }' "$folder/simulator.txt")
    control_token=$(cat "$folder/certs/control-token")
    credentials=(--gateway "127.0.0.1:$port" --auth-key "$folder/certs/AuthKey_SALVODEV01.p8" --key-id SALVODEV01
        --team-id SALVOTEAM1 --ca "$(awk '/^  CA/ { print $2 }' "$folder/simulator.txt")" --server-name localhost)
}

# SIGTERM, then up to 20 s to stop.
stop_serve() {
    kill -TERM "$serve_pid"
    for _ in $(seq 200); do
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$serve_pid" 2>/dev/null && echo "serve did not stop within 20 s of SIGTERM" >&2
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
}

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
