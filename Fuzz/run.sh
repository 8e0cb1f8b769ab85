#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzzer + address sanitizers) and runs each:
# first every input of its committed corpus (Fuzz/Corpus/TARGET), then new
# inputs for SECONDS (default 60). New inputs go to a scratch directory, not
# into the committed corpus; with --merge they are merged (minimised) into it
# afterwards.
#   Fuzz/run.sh [--merge] [SECONDS] [TARGET ...]
#   Fuzz/run.sh --build-only   (builds the targets, runs nothing)
set -euo pipefail
cd "$(dirname "$0")"
merge=0
build_only=0
if [ "${1:-}" = "--merge" ]; then merge=1; shift; fi
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzRequestParser FuzzResponseParser FuzzForwardedHead FuzzConfig FuzzCertificate FuzzRevocation FuzzProxyAuth FuzzImport FuzzHTTP2Server FuzzHTTP2Client FuzzSockDiag FuzzSOCKS FuzzPAC FuzzClientHello)
scratch=../.build-fuzz
# FUZZ_CONFIGURATION=debug (the test run's smoke): an unoptimised build,
# 50 s instead of 130 s on two cores, running about a tenth as many inputs
# a second; libFuzzer's own main calls each target's LLVMFuzzerTestOneInput
# there. Release otherwise (runs of a minute or more).
configuration=${FUZZ_CONFIGURATION:-release}
# The parent package is a path dependency: SwiftPM's cached build manifest
# does not notice source files added to it, so the manifest is rebuilt each time.
flags=(-c "$configuration" --scratch-path "$scratch" -Xswiftc -use-ld=lld)
swift build "${flags[@]}" --disable-build-manifest-caching \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
bin=$(swift build "${flags[@]}" --show-bin-path)
[ $build_only = 0 ] || exit 0
status=0
# Swift's crash backtracer can hang under ASan; libFuzzer prints the stack.
export SWIFT_BACKTRACE=enable=no
# Two targets at a time (each fuzzer is one thread and this box has two
# cores): every target still fuzzes for SECONDS after replaying its corpus.
# Their reports are printed in order once both have ended.
run_target() {
  local target=$1 work=$2
  if "$bin/$target" "$work" "Corpus/$target" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" 2>"$work/log"; then
    echo 0 >"$work/status"
  else
    echo $? >"$work/status"
  fi
}
report_target() {
  local target=$1 work=$2
  echo "== $target: ${seconds}s"
  if [ "$(cat "$work/status")" != 0 ]; then
    status=1
    echo "FAILED: $target"
    grep -E "ERROR:|SUMMARY:|Fatal error|precondition|#[0-9]+ 0x.* in .*(Pin|Fuzz|main)" "$work/log" | head -40
    mkdir -p ../.build-fuzz/artifacts
    cp "$work"/crash-* "$work"/timeout-* "$work"/oom-* ../.build-fuzz/artifacts/ 2>/dev/null || true
    echo "the failing input is kept in .build-fuzz/artifacts/ (reproduce: $bin/$target FILE)"
    ls ../.build-fuzz/artifacts/ | tail -3
  else
    # INITED comes once every committed input has run.
    replayed=$(grep -oE "^#[0-9]+[[:space:]]+INITED" "$work/log" | grep -oE "[0-9]+" | head -1)
    if [ -z "$replayed" ]; then
      status=1
      echo "FAILED: $target (the committed corpus was not replayed)"
      tail -5 "$work/log"
    else
      echo "replayed the committed corpus ($(ls "Corpus/$target" | wc -l) files, $replayed runs)"
    fi
    grep -E "^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+.*DONE" "$work/log" || tail -3 "$work/log"
    if [ $merge = 1 ]; then
      "$bin/$target" -merge=1 "Corpus/$target" "$work" -max_len=8192 2>/dev/null || true
    fi
  fi
  rm -rf "$work"
}
for ((index = 0; index < ${#targets[@]}; index += 2)); do
  pair=("${targets[@]:index:2}")
  works=()
  for target in "${pair[@]}"; do
    mkdir -p "Corpus/$target"
    work=$(mktemp -d)
    works+=("$work")
    run_target "$target" "$work" &
  done
  wait
  for position in "${!pair[@]}"; do report_target "${pair[$position]}" "${works[$position]}"; done
done
exit $status
