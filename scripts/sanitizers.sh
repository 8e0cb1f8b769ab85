#!/usr/bin/env bash
# Sanitizer builds, each in its own scratch directory:
#  1. AddressSanitizer (the build the fuzz targets share, Fuzz/build.sh):
#     the unit tests (leak detection off here: XCTest and the runtime keep
#     objects alive until exit; leaks are judged in 2).
#  2. LeakSanitizer on the real daemon: the same end-to-end workload run for
#     SMALL and LARGE rounds (scripts/sanitizer-workload.py). A leak per
#     request grows with the rounds; what the runtime keeps until exit does
#     not. Fails when the larger run leaked more than SLACK bytes beyond the
#     smaller one, or ASan reported any memory error.
#  3. ThreadSanitizer: the unit tests, and the same workload on the daemon;
#     any report fails.
# Prints one line per check and exits non-zero if one failed.
#
# Two cores: the ThreadSanitizer build runs niced beside the ASan unit
# tests, and the leak workloads and the TSan daemon workload run beside the
# TSan unit tests. Each of those waits on sockets, timers and children as
# much as it computes; none of their checks is a time.
set -euo pipefail
cd "$(dirname "$0")/.."
# The package leaves its end-to-end test target out of these builds: only
# the unit suites and the daemon run under the sanitizers.
export PINPROXY_UNIT_TESTS_ONLY=1
unset PINPROXY_END_TO_END_ONLY
small=${SANITIZER_SMALL_ROUNDS:-5}
large=${SANITIZER_LARGE_ROUNDS:-40}
slack=${SANITIZER_LEAK_SLACK:-4096}
failed=0
report() { echo "sanitizers: $1"; }
# When each step ended, in seconds from the start: the phase is the longest
# of scripts/test.sh, and these say which of its steps grew.
started=$SECONDS
mark() { echo "timing: $1 at +$((SECONDS - started)) s"; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# The unit suites run directly from the test binary, in three processes at
# once, each running its share of the classes one after another: a process
# per test (swift test --parallel) took four times as long, each sanitized
# process being slow to start, and `swift test` holds a lock on its build
# directory. The binary takes a comma-separated list of classes. The shares:
# PinTLSTests (the TLS and trust scenarios), PinProxyTests (they wait on
# loops and timers), and every other class the binary lists, so that no
# suite is ever left out. A report ends its process: the run fails and the
# log shows it.
# grep's arguments choosing each share's tests.
shares=("-E ^PinTLSTests\." "-E ^PinProxyTests\." "-vE ^(PinTLSTests|PinProxyTests)\.")
# units SCRATCH NAME [PRELOAD]: runs the shares, writes SCRATCH/unit-NAME.log;
# sets $unit_tests to the tests run; fails if a process failed or ran
# nothing, or fewer tests ran than the binary lists.
units() {
  local scratch=$1 name=$2 preload=${3:-} binary="$1/debug/pinproxyPackageTests.xctest" status=0
  local listed index classes pids=() logs=()
  listed=$("$binary" --list-tests 2>/dev/null | grep -E '^[A-Za-z0-9_]+\.[A-Za-z0-9_]+/' || true)
  for index in 0 1 2; do
    # shellcheck disable=SC2086 # the share's flag and pattern are two words
    classes=$(grep ${shares[$index]} <<<"$listed" | cut -d/ -f1 | sort -u | paste -sd, -)
    if [ -z "$classes" ]; then
      echo "no test classes for share $index listed by $binary" >&2
      return 1
    fi
    logs+=("$scratch/unit-$name-$index.log")
    LD_PRELOAD="$preload" "$binary" "$classes" >"$scratch/unit-$name-$index.log" 2>&1 &
    pids+=($!)
  done
  for index in 0 1 2; do wait "${pids[$index]}" || status=1; done
  cat "${logs[@]}" >"$scratch/unit-$name.log"
  unit_tests=0
  local log count
  for log in "${logs[@]}"; do
    count=$(grep -oE 'Executed [0-9]+ tests' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    [ "$count" -gt 0 ] || status=1
    unit_tests=$((unit_tests + count))
  done
  local expected
  expected=$(grep -c . <<<"$listed")
  if [ "$unit_tests" -lt "$expected" ]; then
    echo "$unit_tests of the $expected tests $binary lists ran" >&2
    status=1
  fi
  return $status
}

Fuzz/build.sh .build-asan debug --build-tests >/dev/null
mark "the AddressSanitizer build ended"
tsan_build_log=$(mktemp)
(nice -n 10 swift build --build-tests --sanitize=thread --scratch-path .build-tsan >"$tsan_build_log" 2>&1) &
tsan_build=$!
if ASAN_OPTIONS=detect_leaks=0 units .build-asan address && ! grep -q "ERROR: AddressSanitizer" .build-asan/unit-address.log; then
  report "address: unit tests clean ($unit_tests tests, in three processes)"
else
  failed=1
  report "address: unit tests FAILED"
  grep -E "ERROR: AddressSanitizer|error:" -A20 .build-asan/unit-address.log | head -60
fi
mark "the AddressSanitizer unit tests ended"
# The unit tests run here and not in the plain build (scripts/test.sh): each
# test's result, for the run's count and its list of failures.
echo "units: $(grep -cE "^Test Case '.*' passed \(" .build-asan/unit-address.log) passed, $(grep -cE "^Test Case '.*' failed \(" .build-asan/unit-address.log) failed"
grep -oE "^Test Case '.*' failed \(" .build-asan/unit-address.log | sed -E "s/^Test Case '(.*)' failed \(/units: FAILED \1/" || true

# The leak workloads, one after the other, beside what follows.
leak_dir=$(mktemp -d)
(
  python3 scripts/sanitizer-workload.py --binary .build-asan/debug/pinproxy --rounds "$small" >"$leak_dir/first"
  python3 scripts/sanitizer-workload.py --binary .build-asan/debug/pinproxy --rounds "$large" >"$leak_dir/second"
) &
leak_lane=$!

if ! wait "$tsan_build"; then
  tail -30 "$tsan_build_log"
  rm -f "$tsan_build_log"
  report "thread: the build FAILED"
  exit 1
fi
tail -1 "$tsan_build_log"
rm -f "$tsan_build_log"
mark "the ThreadSanitizer build ended"
gcc -shared -fPIC -O2 -o .build-tsan/keep-openssl-at-exit.so scripts/keep-openssl-at-exit.c -lcrypto
python3 scripts/sanitizer-workload.py --binary .build-tsan/debug/pinproxy --rounds "$small" >"$leak_dir/thread" &
thread_lane=$!
if units .build-tsan thread "$PWD/.build-tsan/keep-openssl-at-exit.so" &&
  ! grep -q "WARNING: ThreadSanitizer" .build-tsan/unit-thread.log; then
  report "thread: unit tests clean ($unit_tests tests, in three processes)"
else
  failed=1
  report "thread: unit tests FAILED"
  grep -E "WARNING: ThreadSanitizer|error:" -A24 .build-tsan/unit-thread.log | head -80
fi
mark "the ThreadSanitizer unit tests ended"

wait "$leak_lane" || true
mark "the leak workloads ended"
first=$(cat "$leak_dir/first")
second=$(cat "$leak_dir/second")
if [ -n "$first" ] && [ -n "$second" ]; then
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
else
  failed=1
  report "leak: FAILED (a workload reported nothing)"
fi

wait "$thread_lane" || true
mark "the ThreadSanitizer daemon workload ended"
workload=$(cat "$leak_dir/thread")
if [ -n "$workload" ] && [ "$(field "$workload" tsan_warnings)" -eq 0 ]; then
  report "thread: daemon workload clean ($(field "$workload" requests) requests)"
else
  failed=1
  report "thread: daemon workload FAILED"
  [ -z "$workload" ] || grep -A30 "WARNING: ThreadSanitizer" "$(field "$workload" log)" | head -80
fi
rm -rf "$leak_dir"
exit $failed
