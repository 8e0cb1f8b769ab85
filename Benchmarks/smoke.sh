#!/usr/bin/env bash
# Keeps the benchmarks from rotting unseen: builds every benchmark target
# (Benchmarks/, declared by the root package when PINPROXY_BENCHMARKS is
# set), runs each package-benchmark target for a few iterations
# (BENCHMARK_SMOKE=1; figures are printed, never asserted), checks that the
# load generator starts, runs Benchmarks/compare once, briefly, against nginx,
# runs the allocation guard (Benchmarks/allocations.sh) and the instruction
# ratchet (Benchmarks/instructions-per-request.py --ceiling), all with the
# release pinproxy the test run built (PINPROXY_RELEASE).
#
# The benchmarks are a debug build: the point is that their code builds and
# runs, and a debug build of them takes a fraction of a release one. Prints
# one line per check, "benchmarks: NAME ok" or "benchmarks: NAME FAILED";
# exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")"
status=0
say() { echo "benchmarks: $1 $2"; [ "$2" = ok ] || status=1; }

# The benchmark targets belong to the root package when PINPROXY_BENCHMARKS
# is set: built into its own debug build (.build), where the test run has
# compiled pinproxy's modules already. The build description is planned
# afresh: the one cached by a build without the variable lacks these targets.
build_log=$(mktemp)
(cd .. && PINPROXY_BENCHMARKS=1 swift build --disable-build-manifest-caching) >"$build_log" 2>&1
build_status=$?
tail -3 "$build_log"
rm -f "$build_log"
if [ "$build_status" -ne 0 ]; then
  say build FAILED
  exit 1
fi
say build ok
bin=$(cd .. && PINPROXY_BENCHMARKS=1 swift build --show-bin-path)

for target in TrustEvaluation Interception; do
  log=$(mktemp)
  # Run directly (not through the plugin), each benchmark prints "Debug
  # results for NAME" once it ran: every one declared in the source must.
  declared=$(grep -cE '^\s*Benchmark\(' "Benchmarks/$target/$target.swift")
  if BENCHMARK_SMOKE=1 timeout 300 "$bin/$target" --quiet true >"$log" 2>&1 &&
    ran=$(grep -c "^Debug results for" "$log") && [ "$ran" -eq "$declared" ]; then
    grep "^Debug results for" "$log" | sed 's/^Debug results for /  ran: /'
    say "$target" ok
  else
    tail -20 "$log"
    say "$target" FAILED
  fi
  rm -f "$log"
done

if "$bin/pinproxy-load" --help >/dev/null 2>&1; then say pinproxy-load ok; else say pinproxy-load FAILED; fi

# The release pinproxy scripts/test.sh built (PINPROXY_RELEASE), else the
# debug one: compare runs either; the allocation guard needs the release one.
pinproxy=${PINPROXY_RELEASE:-"$(cd .. && pwd)/.build/debug/pinproxy"}
[ -x "$pinproxy" ] || { say compare FAILED; echo "  $pinproxy not built" >&2; exit 1; }
# The allocation guard and the instruction ratchet count (allocations per
# request, callgrind's instructions), so what runs beside them cannot move
# them: they run beside the compare, whose figures are printed, never
# asserted, and which waits on its loads for much of its time. Each writes
# its own log, printed after the compare's output. Both need the release
# build.
counts_dir=$(mktemp -d)
counting=()
# beside NAME TIMEOUT COMMAND...: starts one count check in the background.
beside() {
  local name=$1
  shift
  if [ -z "${PINPROXY_RELEASE:-}" ]; then
    echo "  $name counts a release build: set PINPROXY_RELEASE" >"$counts_dir/$name.log"
    echo 1 >"$counts_dir/$name.status"
    return
  fi
  (
    timeout "$@" >"$counts_dir/$name.log" 2>&1
    echo $? >"$counts_dir/$name.status"
  ) &
  counting+=($!)
}
beside allocations 120 ./allocations.sh "$pinproxy"
# The instruction ratchet: pinproxy's own instructions per keep-alive
# request, counted by callgrind over a short window of the release build,
# against the committed ceiling (Benchmarks/instructions-ceiling). A count,
# not a time: the machine's load cannot move it.
beside instructions 300 ./instructions-per-request.py "$pinproxy" --ceiling instructions-ceiling
if timeout 600 ./compare --duration 1 --runs 1 --loads keep-alive --only nginx,smoke-forward \
  --pinproxy "smoke=$pinproxy"; then
  say compare ok
else
  say compare FAILED
fi
for pid in "${counting[@]}"; do wait "$pid" || true; done
for check in allocations instructions; do
  cat "$counts_dir/$check.log"
  if [ "$(cat "$counts_dir/$check.status" 2>/dev/null)" = 0 ]; then say "$check" ok; else say "$check" FAILED; fi
done
rm -rf "$counts_dir"
exit "$status"
