#!/usr/bin/env bash
# A send through a proxy against the same send direct, measured in the same run: each job start to exit (wall
# clock), direct, through tinyproxy (HTTP CONNECT, Basic authentication), through the same tinyproxy with TCP_NODELAY
# on its sockets (`nodelay`: Benchmarks/tcp-nodelay.c, built with cc and loaded with LD_PRELOAD) and through danted
# (SOCKS5), alternately, RUNS times each, for each interface (TCP_NODELAY_ON=accepted or connected: on that side of
# tinyproxy only; QUICKACK=1: every `salvo send` acknowledges each read at once, Benchmarks/tcp-quickack.c); prints every run, the medians, the ratio of each proxied median to the direct
# one, and the proxy's own CPU seconds for the job (user + system, read from /proc before and after). Each run is
# checked against the simulator's ledger (emptied before it): every token accepted once.
#
#   Benchmarks/proxy.sh SALVO [ROWS] [RUNS]
#
# e.g. Benchmarks/proxy.sh .build/release/salvo 200000 3
# The sink is the simulator (`salvo simulate`, binary gateway and HTTP/2 endpoint, client certificates), on the same
# cores; the proxies are Debian's tinyproxy and danted (apt-get install tinyproxy dante-server) on free loopback ports
# with throwaway configurations. PROTOCOLS="binary h2" chooses the interfaces.
set -euo pipefail
salvo=${1:?usage: proxy.sh SALVO [ROWS] [RUNS]}
rows=${2:-200000}
runs=${3:-3}
protocols=${PROTOCOLS:-binary h2}
connections=2
here=$(cd "$(dirname "$0")" && pwd)
payload=$here/../data/payloads/bench-100.json
work=$(mktemp -d /tmp/salvo-bench-proxy-XXXXXX)
chmod 777 "$work"
cleanup=("rm -rf $work")
trap 'for c in "${cleanup[@]}"; do eval "$c" >/dev/null 2>&1 || true; done' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done; exit 1; }

"$salvo" simulate --gateway-port 0 --feedback-port 0 --h2-port 0 --control-port 0 --topic com.example.bench \
    --certificates "$work/certs" >"$work/simulator.txt" 2>&1 &
simulator=$!
cleanup=("kill $simulator" "${cleanup[@]}")
for _ in $(seq 300); do grep -q '^  control' "$work/simulator.txt" && break; sleep 0.1; done
control=$(awk '/^  control/ { sub(",", "", $2); print $2 }' "$work/simulator.txt")
control_token=$(cat "$work/certs/control-token")
gateway=$(awk '/^  gateway/ { split($2, a, ":"); print a[2] }' "$work/simulator.txt")
http2=$(awk '/^  http2/ { split($2, a, ":"); print a[2] }' "$work/simulator.txt")
credentials=(--cert "$(awk '/^  client/ { print $2 }' "$work/simulator.txt")"
    --key "$(awk '/^  key/ { print $2 }' "$work/simulator.txt")"
    --ca "$(awk '/^  CA/ { print $2 }' "$work/simulator.txt")")
"$salvo" tokens generate "$rows" --seed 41 --output "$work/tokens.csv"

# The proxies.
tiny_port=$(free_port)
cat >"$work/tinyproxy.conf" <<CONF
Port $tiny_port
Listen 127.0.0.1
Timeout 600
MaxClients 100
Allow 127.0.0.1
LogLevel Warning
BasicAuth bench bench-password
CONF
tinyproxy -d -c "$work/tinyproxy.conf" >"$work/tinyproxy.log" 2>&1 &
tinyproxy=$!
cleanup=("kill $tinyproxy" "${cleanup[@]}")
# The same tinyproxy with TCP_NODELAY on its sockets (it sets none: Nagle's algorithm holds its small relayed writes
# until the peer's acknowledgement), to tell that cost apart from the rest of the proxy's.
cc -shared -fPIC -O2 -o "$work/tcp-nodelay.so" "$here/tcp-nodelay.c" -ldl
nodelay_port=$(free_port)
sender_preload=()
if [ "${QUICKACK:-}" = 1 ]; then
    cc -shared -fPIC -O2 -o "$work/tcp-quickack.so" "$here/tcp-quickack.c" -ldl
    sender_preload=(env "LD_PRELOAD=$work/tcp-quickack.so")
fi
sed "s/^Port .*/Port $nodelay_port/" "$work/tinyproxy.conf" >"$work/tinyproxy-nodelay.conf"
TCP_NODELAY_ON=${TCP_NODELAY_ON:-} LD_PRELOAD=$work/tcp-nodelay.so tinyproxy -d -c "$work/tinyproxy-nodelay.conf" >"$work/tinyproxy-nodelay.log" 2>&1 &
cleanup=("kill $!" "${cleanup[@]}")
dante_port=$(free_port)
{
    echo "logoutput: $work/danted.log"
    echo "internal: 127.0.0.1 port = $dante_port"
    echo "external: 127.0.0.1"
    echo "socksmethod: none"
    echo "clientmethod: none"
    [ "$(id -u)" = 0 ] && printf 'user.privileged: root\nuser.unprivileged: nobody\n'
    echo "client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }"
    echo "socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 command: connect }"
} >"$work/danted.conf"
danted -f "$work/danted.conf" -p "$work/danted.pid" >"$work/danted.out" 2>&1 &
danted=$!
cleanup=("kill $danted" "${cleanup[@]}")
wait_port "$tiny_port"
wait_port "$nodelay_port"
wait_port "$dante_port"

# CPU seconds (user + system) of a proxy's processes so far: tinyproxy is one process (threads); danted forks
# children, whose time is read while they live and through the mother's cutime/cstime once reaped.
ticks=$(getconf CLK_TCK)
cpu() {
    local name=$1 total=0 pid fields
    for pid in $(pgrep -x "$name"); do
        fields=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
        # After the command: state is field 1, utime 12, stime 13, cutime 14, cstime 15.
        total=$((total + $(echo "$fields" | awk '{ print $12 + $13 + $14 + $15 }')))
    done
    echo "$total"
}

# One job, start to exit; appends its wall seconds to $work/$protocol-$kind and the proxy's CPU seconds to
# $work/$protocol-$kind.cpu (a warm-up with kind `-` is not counted).
run() {
    local protocol=$1 kind=$2 port arguments=() proxy=() process=""
    if [ "$protocol" = h2 ]; then
        port=$http2
        arguments=(--protocol h2 --topic com.example.bench --push-type alert)
    else
        port=$gateway
    fi
    case $kind in
    http) proxy=(--proxy "http://bench:bench-password@127.0.0.1:$tiny_port") process=tinyproxy ;;
    nodelay) proxy=(--proxy "http://bench:bench-password@127.0.0.1:$nodelay_port") process=tinyproxy ;;
    socks) proxy=(--proxy "socks5://127.0.0.1:$dante_port") process=danted ;;
    *) proxy=(--no-proxy) ;;
    esac
    local before=0 after=0
    curl -sf -X POST -H "Authorization: Bearer $control_token" "$control/reset" >/dev/null
    [ -n "$process" ] && before=$(cpu "$process")
    /usr/bin/time -f %e -o "$work/time" "${sender_preload[@]}" "$salvo" send "$work/tokens.csv" --payload "$payload" \
        --gateway "127.0.0.1:$port" "${credentials[@]}" "${arguments[@]}" "${proxy[@]}" \
        --connections "$connections" --report "$work/report.json" --quiet >/dev/null
    [ -n "$process" ] && after=$(cpu "$process")
    # Every run delivers each token once: by the report, and by the simulator's ledger (emptied before the run).
    curl -sf -H "Authorization: Bearer $control_token" "$control/ledger" >"$work/ledger.json"
    python3 - "$work/report.json" "$work/ledger.json" "$rows" "$protocol $kind" <<'PY'
import json, sys
report, ledger, rows, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
delivered = report.get("confirmed", 0) + report.get("presumed", 0)
if delivered != rows:
    sys.exit(f"{run}: the report delivered {delivered} of {rows}")
if (ledger["accepted"], ledger["distinctTokens"], ledger["tokensAcceptedMoreThanOnce"]) != (rows, rows, 0):
    sys.exit(f"{run}: the ledger accepted {ledger['accepted']} ({ledger['distinctTokens']} distinct tokens, "
             f"{ledger['tokensAcceptedMoreThanOnce']} more than once) of {rows}")
PY
    [ "$kind" = - ] && return
    local proxy_cpu
    proxy_cpu=$(awk -v t=$((after - before)) -v hz="$ticks" 'BEGIN { printf "%.2f", t / hz }')
    printf '%-6s %-7s %6s s   proxy CPU %s s\n' "$protocol" "$kind" "$(cat "$work/time")" "$proxy_cpu"
    cat "$work/time" >>"$work/$protocol-$kind"
    echo "$proxy_cpu" >>"$work/$protocol-$kind.cpu"
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for protocol in $protocols; do
    # The simulator's ledger grows its table on a first run: a warm-up run before the measured ones.
    run "$protocol" -
    for _ in $(seq "$runs"); do
        run "$protocol" direct
        run "$protocol" http
        run "$protocol" nodelay
        run "$protocol" socks
    done
done
echo
for protocol in $protocols; do
    direct=$(median "$work/$protocol-direct")
    for kind in http nodelay socks; do
        awk -v p="$protocol" -v k="$kind" -v rows="$rows" -v d="$direct" -v t="$(median "$work/$protocol-$kind")" \
            -v c="$(median "$work/$protocol-$kind.cpu")" 'BEGIN {
            printf "%-6s %d rows: direct %.2f s, through %-5s %.2f s; ratio %.2f; the proxy'"'"'s CPU %.2f s (%.0f %% of the proxied job)\n",
                p, rows, d, k, t, t / d, c, 100 * c / t
        }'
    done
done
