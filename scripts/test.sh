#!/usr/bin/env bash
# Runs every test: unit tests of each module (in the sanitizer builds), the AFSecurityPolicy scenarios,
# end-to-end tests that run the real pinproxy binary against openssl, curl and
# Python clients; then the sanitizer builds (scripts/sanitizers.sh) and a
# short run of every fuzz target (Fuzz/run.sh, from the AddressSanitizer
# build) and a smoke run of the
# benchmarks with the allocation guard (Benchmarks/smoke.sh). The last line
# counts them all.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's seconds, printed as it ends and again at the end, so a run
# that grew shows which part did.
# With each, the CPU seconds its finished processes used (user + system, of
# every process this script has waited for): on two cores a phase's CPU,
# not its wall time, says what it costs the phases beside it.
phases=()
phase_started=$SECONDS
children_cpu() {
  # /proc/PID/stat fields 16 and 17: waited-for children's user and system
  # clock ticks (the command name, field 2, may hold spaces: cut after it).
  local fields
  read -r -a fields <<<"$(sed 's/.*) //' "/proc/$$/stat")"
  echo $(((fields[13] + fields[14]) / $(getconf CLK_TCK)))
}
phase_cpu=$(children_cpu)
phase() {
  local took=$((SECONDS - phase_started)) cpu
  cpu=$(($(children_cpu) - phase_cpu))
  phases+=("$1 ${took}s (${cpu} CPU-s)")
  echo "phase: $1 took ${took}s, ${cpu} CPU-s"
  phase_started=$SECONDS
  phase_cpu=$(children_cpu)
}
scripts/install-deps.sh
phase "install dependencies"
# The plain debug build holds the end-to-end suite only (Package.swift): the
# unit suites run in the sanitizer builds, where AddressSanitizer's run
# counts each of their tests.
export PINPROXY_END_TO_END_ONLY=1
# Test programs call `python3` by name: on a machine where that is pyenv's
# shim, each call ran two shells first. The interpreter it resolves to goes
# first on PATH.
python_bin=$(dirname "$(python3 -c 'import sys; print(sys.executable)')")
export PATH="$python_bin:$PATH"
swift build --build-tests
phase "build (debug, with tests)"
scripts/verify-systemd-unit.sh .build/debug/pinproxy
status=0
# The release build users run (static standard library), for the allocation
# guard and the benchmark smoke: built beside the XCTest run, whose tests
# mostly wait on child processes, niced so that they keep priority. Its own
# build path: SwiftPM locks a build directory for every command. Then, niced
# too, the Debian package of that binary, built and checked (lintian,
# contents, the packaged binary and config; as root, installed, removed and
# purged in a throwaway root): each check counts as one more test. Both take
# the CPU that the tests and the sanitizers' runs leave while they wait.
release_log=$(mktemp)
package_log=$(mktemp)
(
  built=0
  nice -n 10 swift build -c release --static-swift-stdlib --product pinproxy --build-path .build-release \
    >"$release_log" 2>&1 || built=$?
  echo "$built" >"$release_log.status"
  [ "$built" = 0 ] || exit 0
  {
    deb=$(PINPROXY_RELEASE="$PWD/.build-release/release/pinproxy" nice -n 10 scripts/package-deb.sh) &&
      nice -n 10 scripts/check-deb.sh "$deb"
  } >"$package_log" 2>&1
) &
release_and_package=$!
# XCTest only (the suites are XCTest). Most tests wait on child processes
# rather than compute, so they run in parallel, each in its own process;
# those that bind a fixed port or measure a process's memory or CPU
# (Tests/serial-tests.txt) run one at a time, beside the sanitizers'
# builds: nothing else binds their ports, and what they measure (resident
# memory, a daemon's CPU seconds while idle, counts) is not a time that
# load could stretch. `swift test` locks .build, which the sanitizers do not
# use.
serial=$(grep -vE '^\s*(#|$)' Tests/serial-tests.txt | paste -sd '|')
xunit_dir=$(mktemp -d)
export PINPROXY_TEARDOWN_LOG="$xunit_dir/teardowns"
: >"$PINPROXY_TEARDOWN_LOG"
swift test --skip-build --disable-swift-testing --parallel --num-workers "${TEST_WORKERS:-6}" \
  --skip "$serial" --xunit-output "$xunit_dir/parallel.xml" || status=$?
phase "XCTest (parallel)"
expected=$(swift test list --skip-build --disable-swift-testing 2>/dev/null | grep -c '/' || true)
(
  swift test --skip-build --disable-swift-testing --parallel --num-workers 1 \
    --filter "$serial" --xunit-output "$xunit_dir/serial.xml" >"$xunit_dir/serial.log" 2>&1
  echo $? >"$xunit_dir/serial.status"
) &
serial_run=$!
passed=0
failed=0
failed_tests=""

# The folders of Sources/PinProxy form layers without cycles: one more test.
if scripts/folder-layers.py >/dev/null; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  status=1
  failed_tests+=$'\nscripts/folder-layers.py (a cycle between folders of Sources/PinProxy)'
fi

# Each sanitizer check and each fuzz target counts as one more test.
sanitizer_log=$(mktemp)
scripts/sanitizers.sh 2>&1 | tee "$sanitizer_log" || status=1
passed=$((passed + $(grep -cE "^sanitizers: .*(clean|no growth)" "$sanitizer_log" || true)))
failed=$((failed + $(grep -cE "^sanitizers: .*FAILED" "$sanitizer_log" || true)))
failed_tests+=$'\n'"$(grep -E "^sanitizers: .*FAILED" "$sanitizer_log" || true)"
# The unit tests, each counted from AddressSanitizer's run.
unit_counts=$(grep -E "^units: [0-9]+ passed, [0-9]+ failed$" "$sanitizer_log" | tail -1 || true)
if [ -n "$unit_counts" ]; then
  passed=$((passed + $(cut -d' ' -f2 <<<"$unit_counts")))
  failed=$((failed + $(cut -d' ' -f4 <<<"$unit_counts")))
else
  failed=$((failed + 1))
  failed_tests+=$'\n'"units: the unit tests reported no result"
fi
failed_tests+=$'\n'"$(grep -E "^units: FAILED " "$sanitizer_log" || true)"
rm -f "$sanitizer_log"
wait "$serial_run" || true
cat "$xunit_dir/serial.log"
[ "$(cat "$xunit_dir/serial.status" 2>/dev/null)" = 0 ] || status=1
phase "sanitizers (the serial XCTest group beside them)"
summary=$(scripts/xunit-summary.py "$xunit_dir"/parallel.xml "$xunit_dir"/serial.xml) || {
  echo "no XCTest results found" >&2
  exit 1
}
eval "$summary"
# Children that took over 2 s to stop (ChildProcess.stop reports them).
slow_teardowns=$(grep -E "teardown: .* s to stop" "$PINPROXY_TEARDOWN_LOG" | sed -E 's/.*(teardown: )/\1/' | sort | uniq -c || true)
rm -rf "$xunit_dir"
passed=$((passed + xunit_total - xunit_failed))
failed=$((failed + xunit_failed))
slowest=$xunit_slowest
failed_tests+=$'\n'"$xunit_failed_names"
# A test that never reported (its process died before writing a result) is a failure too.
if [ "$xunit_total" -lt "$expected" ]; then
  failed=$((failed + expected - xunit_total))
  failed_tests+=$'\n'"$((expected - xunit_total)) of $expected tests reported no result"
fi
# The release binary (the package goes on being built and checked).
while [ ! -s "$release_log.status" ] && kill -0 "$release_and_package" 2>/dev/null; do sleep 1; done
if [ "$(cat "$release_log.status" 2>/dev/null)" != 0 ]; then
  tail -30 "$release_log"
  echo "the release build failed" >&2
  exit 1
fi
rm -f "$release_log" "$release_log.status"
phase "release build (the part not hidden behind the tests)"
# The fuzzers, niced beside the benchmarks' smoke, which waits on its
# daemons and load runs for much of its time. Each target still replays its
# whole committed corpus and then fuzzes for its seconds (libFuzzer's
# clock), with fewer new inputs where the CPU is shared.
fuzz_log=$(mktemp)
(
  fuzzed=0
  FUZZ_BIN="$PWD/.build-asan/debug" nice -n 10 Fuzz/run.sh "${FUZZ_SECONDS:-3}" >"$fuzz_log" 2>&1 || fuzzed=$?
  echo "$fuzzed" >"$fuzz_log.status"
) &
fuzz_run=$!
# The benchmarks build and run (a few iterations each, figures not asserted),
# and the allocation guard counts what a keep-alive request allocates: each
# check of Benchmarks/smoke.sh counts as one more test.
bench_log=$(mktemp)
PINPROXY_RELEASE="$PWD/.build-release/release/pinproxy" Benchmarks/smoke.sh 2>&1 | tee "$bench_log" || status=1
passed=$((passed + $(grep -cE "^benchmarks: .* ok$" "$bench_log" || true)))
failed=$((failed + $(grep -cE "^benchmarks: .* FAILED$" "$bench_log" || true)))
failed_tests+=$'\n'"$(grep -E "^benchmarks: .* FAILED$" "$bench_log" || true)"
rm -f "$bench_log"
phase "benchmarks smoke"
wait "$release_and_package" || status=1
cat "$package_log"
passed=$((passed + $(grep -cE "^package: .* ok$" "$package_log" || true)))
failed=$((failed + $(grep -cE "^package: .* FAILED$" "$package_log" || true)))
failed_tests+=$'\n'"$(grep -E "^package: .* FAILED$" "$package_log" || true)"
grep -q "^package: " "$package_log" || { failed=$((failed + 1)); failed_tests+=$'\n'"package: not built"; }
rm -f "$package_log"
phase "Debian package (the part not hidden behind the sanitizers and the benchmarks)"
wait "$fuzz_run" || true
cat "$fuzz_log"
[ "$(cat "$fuzz_log.status" 2>/dev/null)" = 0 ] || status=1
passed=$((passed + $(grep -c "^stat::number_of_executed_units" "$fuzz_log" || true)))
failed=$((failed + $(grep -c "^FAILED: " "$fuzz_log" || true)))
failed_tests+=$'\n'"$(grep "^FAILED: " "$fuzz_log" || true)"
grep -q "^stat::number_of_executed_units" "$fuzz_log" || { failed=$((failed + 1)); failed_tests+=$'\n'"fuzz: no target ran"; }
rm -f "$fuzz_log" "$fuzz_log.status"
phase "fuzz (beside the benchmarks; the part not hidden behind them)"
echo
echo "slowest tests (seconds):"
echo "$slowest"
if [ -n "$slow_teardowns" ]; then
  echo "teardowns over 2 s:"
  echo "$slow_teardowns"
fi
echo "phases: ${phases[*]}"
failed_tests=$(echo "$failed_tests" | sed '/^$/d')
if [ -n "$failed_tests" ]; then
  echo "failed:"
  echo "$failed_tests"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit "$status"
