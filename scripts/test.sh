#!/usr/bin/env bash
# Runs every test: unit tests of each module, the AFSecurityPolicy scenarios,
# and end-to-end tests that run the real pinproxy binary against openssl.
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
echo "$((total - failed)) passed, $failed failed"
exit "$status"
