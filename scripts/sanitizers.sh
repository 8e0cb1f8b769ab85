#!/usr/bin/env bash
# Sanitizer builds, each in its own scratch directory:
#  1. AddressSanitizer (the build the fuzz targets share): the unit tests (leak detection off here: XCTest and
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
small=${SANITIZER_SMALL_ROUNDS:-5}
large=${SANITIZER_LARGE_ROUNDS:-40}
slack=${SANITIZER_LEAK_SLACK:-4096}
failed=0
report() { echo "sanitizers: $1"; }

# The unit suites run directly from the test binary, in two processes at
# once (this box has two cores), each running its share of the classes one
# after another: a process per test (swift test --parallel) took four times
# as long, each sanitized process being slow to start. `swift test` holds a
# lock on its build directory, so two of them would run one after the
# other; the binary takes a comma-separated list of classes. The shares are
# balanced by their time: PinTLSTests (the TLS and trust scenarios) against
# the rest. A report ends its process: the run fails and the log shows it.
tls_units="PinTLSTests"
other_units="PinTrustTests|PinHTTPTests|PinHTTP2Tests|PinEventLoopTests|AFSecurityPolicyTests|PinProxyTests"
classes_of() {
  "$1" --list-tests 2>/dev/null | grep -oE "^($2)\.[A-Za-z0-9_]+" | sort -u | paste -sd, -
}
# units_in_two SCRATCH NAME [PRELOAD]: runs both shares, writes
# SCRATCH/unit-NAME.log; sets $unit_tests to the tests run; fails if either
# process failed or ran nothing.
units_in_two() {
  local scratch=$1 name=$2 preload=${3:-} binary="$1/debug/pinproxyPackageTests.xctest" status=0
  local tls_classes other_classes
  tls_classes=$(classes_of "$binary" "$tls_units")
  other_classes=$(classes_of "$binary" "$other_units")
  if [ -z "$tls_classes" ] || [ -z "$other_classes" ]; then
    echo "no test classes listed by $binary" >&2
    return 1
  fi
  LD_PRELOAD="$preload" "$binary" "$tls_classes" >"$scratch/unit-$name-tls.log" 2>&1 &
  local tls=$!
  LD_PRELOAD="$preload" "$binary" "$other_classes" >"$scratch/unit-$name-others.log" 2>&1 || status=1
  wait "$tls" || status=1
  cat "$scratch/unit-$name-tls.log" "$scratch/unit-$name-others.log" >"$scratch/unit-$name.log"
  unit_tests=0
  for log in "$scratch/unit-$name-tls.log" "$scratch/unit-$name-others.log"; do
    local count
    count=$(grep -oE 'Executed [0-9]+ tests' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    [ "$count" -gt 0 ] || status=1
    unit_tests=$((unit_tests + count))
  done
  return $status
}

# The AddressSanitizer build carries libFuzzer's coverage and the fuzz
# targets too (Fuzz/build.sh): scripts/test.sh runs the fuzzers from it.
Fuzz/build.sh .build-asan debug --build-tests >/dev/null
# The ThreadSanitizer build, niced beside the ASan runs: it takes the CPU
# they leave (their tests and the leak workload wait on sockets and
# children as much as they compute).
tsan_build_log=$(mktemp)
( nice -n 10 swift build --build-tests --sanitize=thread --scratch-path .build-tsan >"$tsan_build_log" 2>&1 ) &
tsan_build=$!
if ASAN_OPTIONS=detect_leaks=0 units_in_two .build-asan address && ! grep -q "ERROR: AddressSanitizer" .build-asan/unit-address.log; then
  report "address: unit tests clean ($unit_tests tests, in two processes)"
else
  failed=1
  report "address: unit tests FAILED"; grep -E "ERROR: AddressSanitizer|error:" -A20 .build-asan/unit-address.log | head -60
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

if ! wait "$tsan_build"; then
  tail -30 "$tsan_build_log"
  rm -f "$tsan_build_log"
  report "thread: the build FAILED"
  exit 1
fi
tail -1 "$tsan_build_log"
rm -f "$tsan_build_log"
gcc -shared -fPIC -O2 -o .build-tsan/keep-openssl-at-exit.so scripts/keep-openssl-at-exit.c -lcrypto
if units_in_two .build-tsan thread "$PWD/.build-tsan/keep-openssl-at-exit.so" &&
  ! grep -q "WARNING: ThreadSanitizer" .build-tsan/unit-thread.log; then
  report "thread: unit tests clean ($unit_tests tests, in two processes)"
else
  failed=1
  report "thread: unit tests FAILED"; grep -E "WARNING: ThreadSanitizer|error:" -A24 .build-tsan/unit-thread.log | head -80
fi
workload=$(python3 scripts/sanitizer-workload.py --binary .build-tsan/debug/pinproxy --rounds "$small")
if [ "$(field "$workload" tsan_warnings)" -eq 0 ]; then
  report "thread: daemon workload clean ($(field "$workload" requests) requests)"
else
  failed=1
  report "thread: daemon workload FAILED"; grep -A30 "WARNING: ThreadSanitizer" "$(field "$workload" log)" | head -80
fi
exit $failed
