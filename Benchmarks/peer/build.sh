#!/bin/sh
# Builds the reference HTTP/2 peer offline from Debian's packages (golang-go, golang-golang-x-net-dev):
#   Benchmarks/peer/build.sh OUTPUT_FOLDER   → OUTPUT_FOLDER/salvo-h2-peer
# GOPATH mode against /usr/share/gocode, so nothing is downloaded.
set -eu
out=${1:?usage: build.sh OUTPUT_FOLDER}
here=$(cd "$(dirname "$0")" && pwd)
gopath=${SALVO_PEER_GOPATH:-/usr/share/gocode}
command -v go >/dev/null 2>&1 || { echo "build.sh: no go command (apt-get install golang-go)" >&2; exit 3; }
[ -d "$gopath/src/golang.org/x/net/http2" ] || {
    echo "build.sh: $gopath/src/golang.org/x/net/http2 is missing (apt-get install golang-golang-x-net-dev)" >&2
    exit 3
}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"
GO111MODULE=off GOPATH="$gopath" GOFLAGS= GOPROXY=off CGO_ENABLED=0 \
    GOCACHE="${GOCACHE:-$out/.gocache}" \
    go build -trimpath -o "$out/salvo-h2-peer.tmp" .
mv -f "$out/salvo-h2-peer.tmp" "$out/salvo-h2-peer"
echo "$out/salvo-h2-peer"
