#!/usr/bin/env bash
# The fleet's chaos run, longer than CI's (FleetChaosTests): three `salvo serve` workers on a PostgreSQL cluster of
# their own, each sending to a simulator of its own, a stream of transactional pushes posted to all three through the
# API for SECONDS and a campaign of CAMPAIGN_ROWS rows paced to last four fifths of it, run by all three in partitions,
# a `kill -9` of one worker every KILL_EVERY seconds (each worker in turn but the one the stall stops, started again at
# once), one worker SIGSTOPped past its lease and SIGCONTed, and one `pg_ctl restart -m fast`. At its end it prints the
# ledgers' counts (delivered once, more than once and never; declared uncertain; what the stopped worker sent after
# waking), for the stream and for the campaign, and fails when a notification or a row was lost, sent twice more often
# than declared uncertain, or sent by the stopped worker after another took it.
#
#   Benchmarks/chaos.sh [SECONDS] [KILL_EVERY] [CAMPAIGN_ROWS]      (600, 30 and 300000 by default)
#
# Runs the test binary of a debug build (`swift build --build-tests` first). Needs initdb, pg_ctl and psql (Debian's
# postgresql; as root the cluster runs as the `postgres` user). Bounded: the run's own length, and the suite's limit
# of 30 minutes.
set -euo pipefail
seconds=${1:-600}
kill_every=${2:-30}
campaign_rows=${3:-300000}
here=$(cd "$(dirname "$0")/.." && pwd)
tests=$here/.build/debug/SalvoPackageTests.xctest
[ -x "$tests" ] || { echo "chaos.sh: $tests is missing: run swift build --build-tests first" >&2; exit 2; }
[ "$seconds" -ge 60 ] && [ "$seconds" -le 1500 ] || { echo "chaos.sh: SECONDS is 60 to 1500" >&2; exit 2; }
[ "$kill_every" -ge 5 ] || { echo "chaos.sh: KILL_EVERY is at least 5" >&2; exit 2; }
[ "$campaign_rows" -ge 1000 ] && [ "$campaign_rows" -le 5000000 ] || {
    echo "chaos.sh: CAMPAIGN_ROWS is 1000 to 5000000" >&2
    exit 2
}
log=$(mktemp /tmp/salvo-chaos-XXXXXX.log)
set +e
SALVO_CHAOS_SECONDS=$seconds SALVO_CHAOS_KILL_EVERY=$kill_every SALVO_CHAOS_CAMPAIGN_ROWS=$campaign_rows \
    timeout $((seconds + 900)) "$tests" --testing-library swift-testing --filter FleetChaosTests >"$log" 2>&1
status=$?
set -e
# The ledgers' counts, and the test's verdict (its whole output stays in the log).
grep -E '^chaos: |^campaign: |recorded an issue|passed after|failed after' "$log" || true
echo "chaos.sh: exit $status, the whole output in $log"
exit "$status"
