#!/usr/bin/env bash
# Builds pinproxy with AddressSanitizer and libFuzzer's coverage, the fuzz
# targets (Fuzz/Sources, declared in the root Package.swift when
# PINPROXY_FUZZ_TARGETS is set) among its products. One build serves both:
# scripts/sanitizers.sh runs the unit tests and the leak workload from it and
# Fuzz/run.sh runs the fuzzers from it (AddressSanitizer's runtime answers
# the coverage callbacks where libFuzzer is not linked).
#   Fuzz/build.sh SCRATCH CONFIGURATION [swift build arguments…]
# Prints the directory holding the binaries as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$1 configuration=$2
shift 2
export PINPROXY_FUZZ_TARGETS=1
# What swiftc's -sanitize=fuzzer instruments with, without linking libFuzzer
# into every binary: only the fuzz targets link it (their linker settings).
flags=(-c "$configuration" --scratch-path "$scratch" --sanitize=address
  -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table)
swift build "${flags[@]}" "$@" >&2
swift build "${flags[@]}" --show-bin-path
