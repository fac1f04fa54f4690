#!/usr/bin/env bash
# A campaign through `salvo serve` beside `salvo send --journal` of the same rows, in the same run, against one
# `salvo simulate` (HTTP/2, provider tokens signed with the development key) on the same cores:
#
#   Benchmarks/campaign.sh SALVO [ROWS] [RUNS]
#
# - send: `salvo send TOKENS --journal DIR` (a fresh journal each run: a campaign is such a job), start to exit.
# - the campaign: `salvo serve` on a fresh store (the same gateway, credentials and 2 connections), then
#   `POST /v1/campaigns` with the same CSV uploaded as the body (curl, `--data-binary`) and the same payload, timed
#   from the upload's start to the first `GET /v1/campaigns/{id}` that says `finished`, polled every POLL_MS (100
#   by default: at most 2 % of a million rows' time, and light beside the job); the upload's own time is printed
#   beside it.
# Every run checks that each row was delivered: send's report and the campaign's counts (`delivered`) hold ROWS, and
# the simulator's ledger holds each of the ROWS tokens once. Needs curl and python3. Loopback only; throwaway folders; every wait is
# bounded.
set -euo pipefail
salvo=$(realpath "${1:?usage: campaign.sh SALVO [ROWS] [RUNS]}")
rows=${2:-1000000}
runs=${3:-3}
connections=2
topic=com.example.bench
here=$(cd "$(dirname "$0")" && pwd)
payload=$here/../data/payloads/bench-100.json
client=$here/service-client.py
work=$(mktemp -d /tmp/salvo-bench-campaign-XXXXXX)
export XDG_CACHE_HOME=$work/cache
simulators=()
serve_pid=""
finish() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
    for pid in "${simulators[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap finish EXIT
# wait_line, start_simulator, stop_serve, median.
. "$here/serve-common.sh"

start_simulator 0

"$salvo" tokens generate "$rows" --seed 42 --output "$work/tokens.csv" >/dev/null
# The ledger holds each of the ROWS tokens once: accepted ROWS, as many distinct tokens, none twice.
check_ledger() {
    curl -s --max-time 10 -H "Authorization: Bearer $control_token" "$control/ledger" | python3 -c '
import json, sys
ledger, rows, what = json.load(sys.stdin), int(sys.argv[1]), sys.argv[2]
held = (ledger.get("accepted"), ledger.get("distinctTokens"), ledger.get("tokensAcceptedMoreThanOnce"))
if held != (rows, rows, 0):
    sys.exit(f"{what}: the ledger holds {held[0]} notifications, {held[1]} tokens, {held[2]} twice; not {rows} once")
' "$rows" "$1"
}

send() {
    python3 "$client" reset "$control" "$control_token"
    rm -rf "$work/journal"
    /usr/bin/time -f %e -o "$work/time" "$salvo" send "$work/tokens.csv" --payload "$payload" --protocol h2 \
        --topic "$topic" --push-type alert "${credentials[@]}" --no-proxy --connections "$connections" \
        --journal "$work/journal" --report "$work/report.json" --quiet >/dev/null
    python3 - "$work/report.json" "$rows" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
delivered = report.get("confirmed", 0) + report.get("presumed", 0)
if delivered != int(sys.argv[2]):
    sys.exit(f"send: delivered {delivered} of {sys.argv[2]}")
PY
    check_ledger send
}

# `salvo serve` on a fresh store; sets serve_pid, url and key.
start_serve() {
    local store=$work/salvo-store
    rm -rf "$store"
    key=$("$salvo" serve keys create --store "$store" --name bench | awk '/^key:/ { print $2 }')
    "$salvo" serve --listen 127.0.0.1:0 --store "$store" "${credentials[@]}" --no-proxy --topic "$topic" \
        --connections "$connections" >"$work/serve.txt" 2>"$work/serve.log" &
    serve_pid=$!
    wait_line "$work/serve.txt" 'listening on' "$serve_pid"
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/serve.txt")
}

# One campaign: upload, then poll until finished (bounded: 600 s); prints "SECONDS UPLOAD_SECONDS".
campaign() {
    python3 "$client" reset "$control" "$control_token"
    start_serve
    local settings
    settings=$(python3 -c 'import json, sys; print(json.dumps({"name": "bench", "push_type": "alert",
        "payload": json.load(open(sys.argv[1]))}, separators=(",", ":")))' "$payload")
    python3 - "$url" "$key" "$work/tokens.csv" "$settings" "$rows" "${POLL_MS:-100}" >"$work/campaign-time" <<'PY'
import json, sys, time, subprocess, urllib.request
url, key, csv, settings, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
poll = int(sys.argv[6]) / 1000
start = time.monotonic()
answer = subprocess.run(["curl", "-s", "--max-time", "300", "-X", "POST", url + "/v1/campaigns",
                         "-H", "Authorization: Bearer " + key, "-H", "Content-Type: text/csv",
                         "-H", "Salvo-Campaign: " + settings, "--data-binary", "@" + csv],
                        capture_output=True, check=True).stdout
uploaded = time.monotonic() - start
campaign = json.loads(answer)
if "id" not in campaign:
    sys.exit(f"campaign refused: {answer[:500]!r}")
while True:
    request = urllib.request.Request(url + "/v1/campaigns/" + campaign["id"], headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(request, timeout=10) as response:
        status = json.load(response)
    if status["state"] in ("finished", "failed", "cancelled"):
        break
    if time.monotonic() - start > 600:
        sys.exit("the campaign did not finish within 600 s")
    time.sleep(poll)
seconds = time.monotonic() - start
delivered = status.get("counts", {}).get("delivered", 0)
if status["state"] != "finished" or delivered != rows:
    sys.exit(f"campaign {status['state']}: delivered {delivered} of {rows}: {json.dumps(status)[:500]}")
print(f"{seconds:.2f} {uploaded:.2f}")
PY
    check_ledger campaign
    stop_serve
}

# The simulator's ledger grows its table on a first run: a warm-up send before the measured ones.
send
echo "$rows rows, $runs runs, $connections connections"
for run in $(seq "$runs"); do
    send
    seconds=$(cat "$work/time")
    echo "$seconds" >>"$work/send"
    campaign
    read -r campaign_seconds upload_seconds <"$work/campaign-time"
    echo "$campaign_seconds" >>"$work/campaign"
    awk -v r="$run" -v s="$seconds" -v c="$campaign_seconds" -v u="$upload_seconds" -v n="$rows" 'BEGIN {
        printf "run %d  send --journal %6.2f s %8.0f/s   campaign %6.2f s %8.0f/s (upload %.2f s)   ratio %.3f\n",
            r, s, n / s, c, n / c, u, c / s }'
done
awk -v s="$(median "$work/send")" -v c="$(median "$work/campaign")" -v n="$rows" 'BEGIN {
    printf "median send --journal %6.2f s   campaign %6.2f s   ratio %.3f (goal <= 1.1: %s)\n",
        s, c, c / s, (c / s <= 1.1) ? "met" : "not met" }'
