#!/usr/bin/env bash
# Runs every test: unit tests of each module, the AFSecurityPolicy scenarios,
# end-to-end tests that run the real pinproxy binary against openssl, curl and
# Python clients; then the sanitizer builds (scripts/sanitizers.sh) and a
# short run of every fuzz target (Fuzz/run.sh) and a smoke run of the
# benchmarks (Benchmarks/smoke.sh). The last line counts them all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
scripts/verify-systemd-unit.sh .build/debug/pinproxy
log=$(mktemp)
status=0
# XCTest only: the suites are XCTest, and Swift Testing's empty summary line
# would otherwise be the last word.
swift test --skip-build --disable-swift-testing 2>&1 | tee "$log" || status=$?
summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with [0-9]+ failures?" "$log" | tail -1)
rm -f "$log"
if [ -z "$summary" ]; then echo "no XCTest summary found" >&2; exit 1; fi
total=$(echo "$summary" | sed -E 's/.*Executed ([0-9]+) tests?.*/\1/')
failed=$(echo "$summary" | sed -E 's/.*with ([0-9]+) failures?.*/\1/')
passed=$((total - failed))

# The folders of Sources/PinProxy form layers without cycles: one more test.
if scripts/folder-layers.py >/dev/null; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi

# Each sanitizer check and each fuzz target counts as one more test.
sanitizer_log=$(mktemp)
scripts/sanitizers.sh 2>&1 | tee "$sanitizer_log" || status=1
passed=$((passed + $(grep -cE "^sanitizers: .*(clean|no growth)" "$sanitizer_log" || true)))
failed=$((failed + $(grep -cE "^sanitizers: .*FAILED" "$sanitizer_log" || true)))
rm -f "$sanitizer_log"
# The benchmarks build and run (a few iterations each, figures not asserted):
# each check of Benchmarks/smoke.sh counts as one more test.
bench_log=$(mktemp)
Benchmarks/smoke.sh 2>&1 | tee "$bench_log" || status=1
passed=$((passed + $(grep -cE "^benchmarks: .* ok$" "$bench_log" || true)))
failed=$((failed + $(grep -cE "^benchmarks: .* FAILED$" "$bench_log" || true)))
rm -f "$bench_log"
fuzz_log=$(mktemp)
Fuzz/run.sh "${FUZZ_SECONDS:-15}" 2>&1 | tee "$fuzz_log" || status=1
passed=$((passed + $(grep -c "^stat::number_of_executed_units" "$fuzz_log" || true)))
failed=$((failed + $(grep -c "^FAILED: " "$fuzz_log" || true)))
rm -f "$fuzz_log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit "$status"
