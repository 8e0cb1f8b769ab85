#!/usr/bin/env bash
# The HTTP/1.1 parser fed a request head one byte per call, in a release
# (-O) build of Sources/PinHTTP: ns per byte for a 4 KiB and a 60 KB head.
# Flat means the buffered head is neither copied nor re-scanned per byte.
#   Benchmarks/parser-bytes.sh [SOURCES_DIR]   (default: this checkout's Sources/PinHTTP)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sources=${1:-$here/../Sources/PinHTTP}
out=$(mktemp -d)
swiftc -O -module-name PinHTTPBench "$sources"/*.swift "$here/ParserBytes/main.swift" -o "$out/parser-bytes"
for size in 4096 60000; do "$out/parser-bytes" "$size"; done
rm -rf "$out"
