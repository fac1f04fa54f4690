#!/usr/bin/env bash
# Builds the libFuzzer targets with the fuzzer and address sanitizers and runs each for SECONDS (default 30), seeded
# from data/: golden vectors, payloads, the sample token file, HTTP/2 client streams, and a valid provider token the
# verifier's target writes itself. Every crash is kept as Fuzz/.build-fuzz/crashes/<target>-crash-<hash>; the script
# exits 1 when a target crashed (after running the others).
#
#   Fuzz/run.sh [SECONDS] [TARGET…]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
shift || true
all=(FuzzFrameDecoder FuzzGatewayAnswers FuzzPayload FuzzTokenFile FuzzHTTP2Frames FuzzHTTP2Answers FuzzProviderToken)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi

scratch=Fuzz/.build-fuzz
start=$(date +%s)
# Release: the sanitizers' checks stay, and the targets run several times faster than a debug build.
swift build --package-path Fuzz --scratch-path "$scratch" -c release \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -g
echo "fuzz build: $(($(date +%s) - start)) s"
bin="$(swift build --package-path Fuzz --scratch-path "$scratch" -c release --show-bin-path)"

# Seeds: the golden vectors as bytes (hex with # comments in the files).
seeds="$scratch/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{frames,answers,payloads,tokens,http2,token,answers-h2}
vector() { sed -e 's/#.*//' "data/vectors/$1" | tr -d ' \n' | xxd -r -p; }
for name in command0 command1 command2; do vector "$name.hex" >"$seeds/frames/$name"; done
vector command0.hex >"$seeds/frames/three-frames" && vector command1.hex >>"$seeds/frames/three-frames" \
    && vector command2.hex >>"$seeds/frames/three-frames"
vector error-response.hex >"$seeds/answers/error-response"
vector feedback.hex >"$seeds/answers/feedback"
cp data/payloads/*.json "$seeds/payloads/"
# The token target's first byte chooses the options: 0 reads the file as `send` does by default.
for file in data/tokens/*.csv; do
    { printf '\x00'; cat "$file"; } >"$seeds/tokens/$(basename "$file")"
    { printf '\x80'; cat "$file"; } >"$seeds/tokens/dedupe-$(basename "$file")"
done
cp data/fuzz-seeds/http2/* "$seeds/http2/"

seed_folder() {
    case "$1" in
    FuzzFrameDecoder) echo frames ;;
    FuzzGatewayAnswers) echo answers ;;
    FuzzPayload) echo payloads ;;
    FuzzTokenFile) echo tokens ;;
    FuzzHTTP2Frames) echo http2 ;;
    FuzzProviderToken) echo token ;;
    FuzzHTTP2Answers) echo answers-h2 ;;
    esac
}

mkdir -p "$scratch/crashes"
failed=()
for target in "${targets[@]}"; do
    corpus="$scratch/corpus/$target"
    mkdir -p "$corpus"
    log="$scratch/$target.log"
    # Leak checking is off: the Swift runtime's metadata caches live until exit and read as leaks.
    status=0
    # Token files: inputs up to 8 KiB (the shipped sample is 73 KB, and each run reads every row twice).
    extra=()
    if [ "$target" = FuzzTokenFile ]; then extra=(-max_len=8192); fi
    SALVO_FUZZ_SEED_DIR="$corpus" "$bin/$target" "$corpus" "$seeds/$(seed_folder "$target")" \
        -max_total_time="$seconds" -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$scratch/crashes/$target-" "${extra[@]}" >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    echo "$target: ${runs:-?} executions in $seconds s, corpus $(find "$corpus" -type f | wc -l) inputs, exit $status"
    if [ "$status" -ne 0 ]; then
        failed+=("$target")
        grep -E 'ERROR|Fatal error|Test unit written|SUMMARY' "$log" | head -5 || true
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "crashed: ${failed[*]} (inputs in $scratch/crashes; logs in $scratch/<target>.log)"
    exit 1
fi
