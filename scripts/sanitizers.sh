#!/usr/bin/env bash
# Sanitizer builds, each in its own scratch directory:
#  1. AddressSanitizer: the unit tests (leak detection off here: XCTest and
#     the runtime keep objects alive until exit; leaks are judged in 2).
#  2. LeakSanitizer on the real daemon: the same end-to-end workload run for
#     SMALL and LARGE rounds (scripts/sanitizer-workload.py). A leak per
#     request grows with the rounds; what the runtime keeps until exit does
#     not. Fails when the larger run leaked more than SLACK bytes beyond the
#     smaller one, or ASan reported any memory error.
#  3. ThreadSanitizer: the unit tests, then the same workload on the daemon;
#     any report fails.
# Prints one line per check and exits non-zero if one failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The package leaves its end-to-end test target out of these builds: only
# the unit suites and the daemon run under the sanitizers.
export PINPROXY_UNIT_TESTS_ONLY=1
units="PinTrustTests|PinHTTPTests|PinHTTP2Tests|PinEventLoopTests|PinTLSTests|AFSecurityPolicyTests|PinProxyTests"
small=${SANITIZER_SMALL_ROUNDS:-5}
large=${SANITIZER_LARGE_ROUNDS:-40}
slack=${SANITIZER_LEAK_SLACK:-4096}
failed=0
report() { echo "sanitizers: $1"; }

# Under AddressSanitizer the unit suites run in parallel, each test in its
# own process (they wait more than they compute): a report ends the test's
# process, so it fails the test and its output is shown. The counts come
# from the xUnit file.
units_run() {
  local scratch=$1
  shift
  swift test --skip-build --scratch-path "$scratch" --disable-swift-testing --filter "$units" \
    --parallel --num-workers 3 --xunit-output "$scratch/unit.xml" "$@" >"$scratch/unit.log" 2>&1 || return 1
  eval "$(scripts/xunit-summary.py "$scratch/unit.xml")" && [ "$xunit_failed" -eq 0 ] && [ "$xunit_total" -gt 0 ]
}

swift build --build-tests --sanitize=address --scratch-path .build-asan
if ASAN_OPTIONS=detect_leaks=0 units_run .build-asan --sanitize=address; then
  report "address: unit tests clean ($xunit_total tests, 0 failures)"
else
  failed=1
  report "address: unit tests FAILED"; grep -E "ERROR: AddressSanitizer|error:" -A20 .build-asan/unit.log | head -60
fi

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
first=$(python3 scripts/sanitizer-workload.py --binary .build-asan/debug/pinproxy --rounds "$small")
second=$(python3 scripts/sanitizer-workload.py --binary .build-asan/debug/pinproxy --rounds "$large")
leak_small=$(field "$first" leaked_bytes)
leak_large=$(field "$second" leaked_bytes)
errors=$(($(field "$first" asan_errors) + $(field "$second" asan_errors)))
requests=$(field "$second" requests)
if [ "$errors" -eq 0 ] && [ $((leak_large - leak_small)) -le "$slack" ]; then
  report "leak: $(field "$first" requests) requests left $leak_small bytes at exit, $requests requests left $leak_large (no growth per request)"
else
  failed=1
  report "leak: FAILED ($leak_small bytes after $(field "$first" requests) requests, $leak_large after $requests; $errors ASan errors)"
  grep -E "ERROR: |Direct leak" -A12 "$(field "$second" log)" | head -80
fi

swift build --build-tests --sanitize=thread --scratch-path .build-tsan
# Two processes, each running its half of the suites one after another (a
# ThreadSanitizer process is slow to start: run each test in its own, they
# took 4× as long; one process leaves a core idle), every report read from
# their logs.
# The test binary is run directly: `swift test` holds a lock on its build
# directory, so two of them would run one after the other. It takes a
# comma-separated list of classes.
tsan_tests=.build-tsan/debug/pinproxyPackageTests.xctest
tsan_classes() {
  "$tsan_tests" --list-tests 2>/dev/null | grep -oE "^($1)\.[A-Za-z0-9_]+" | sort -u | paste -sd, -
}
gcc -shared -fPIC -O2 -o .build-tsan/keep-openssl-at-exit.so scripts/keep-openssl-at-exit.c -lcrypto
tsan_run() {
  LD_PRELOAD="$PWD/.build-tsan/keep-openssl-at-exit.so" "$tsan_tests" "$(tsan_classes "$1")" \
    >".build-tsan/unit-$2.log" 2>&1
}
tsan_run "PinProxyTests" proxy &
proxy_run=$!
tsan_status=0
tsan_run "PinTrustTests|PinHTTPTests|PinHTTP2Tests|PinEventLoopTests|PinTLSTests|AFSecurityPolicyTests" others ||
  tsan_status=1
wait "$proxy_run" || tsan_status=1
cat .build-tsan/unit-proxy.log .build-tsan/unit-others.log >.build-tsan/unit.log
tests=0
for log in .build-tsan/unit-proxy.log .build-tsan/unit-others.log; do
  count=$(grep -oE 'Executed [0-9]+ tests' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  tests=$((tests + count))
done
if [ "$tsan_status" -eq 0 ] && [ "$tests" -gt 0 ] && ! grep -q "WARNING: ThreadSanitizer" .build-tsan/unit.log; then
  report "thread: unit tests clean ($tests tests, in two processes)"
else
  failed=1
  report "thread: unit tests FAILED"; grep -E "WARNING: ThreadSanitizer|error:" -A24 .build-tsan/unit.log | head -80
fi
workload=$(python3 scripts/sanitizer-workload.py --binary .build-tsan/debug/pinproxy --rounds "$small")
if [ "$(field "$workload" tsan_warnings)" -eq 0 ]; then
  report "thread: daemon workload clean ($(field "$workload" requests) requests)"
else
  failed=1
  report "thread: daemon workload FAILED"; grep -A30 "WARNING: ThreadSanitizer" "$(field "$workload" log)" | head -80
fi
exit $failed
