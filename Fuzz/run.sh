#!/usr/bin/env bash
# Runs each libFuzzer target: first every input of its committed corpus
# (Fuzz/Corpus/TARGET), then new inputs for SECONDS (default 60). New inputs
# go to a scratch directory, not into the committed corpus; with --merge they
# are merged (minimised) into it afterwards.
#   Fuzz/run.sh [--merge] [SECONDS] [TARGET ...]
#   Fuzz/run.sh --build-only   (builds the targets, runs nothing)
# The targets are built by Fuzz/build.sh into .build-fuzz (release), unless
# FUZZ_BIN names a directory that holds them already: the test run passes
# its AddressSanitizer build's (scripts/sanitizers.sh), a debug build that
# runs about a tenth as many inputs a second, enough for its 3 s.
set -euo pipefail
# FUZZ_BIN relative to where the command was typed.
[ -z "${FUZZ_BIN:-}" ] || FUZZ_BIN=$(cd "$FUZZ_BIN" && pwd)
cd "$(dirname "$0")"
merge=0
build_only=0
if [ "${1:-}" = "--merge" ]; then merge=1; shift; fi
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzRequestParser FuzzResponseParser FuzzForwardedHead FuzzConfig FuzzCertificate FuzzRevocation FuzzProxyAuth FuzzImport FuzzHTTP2Server FuzzHTTP2Client FuzzSockDiag FuzzSOCKS FuzzPAC FuzzClientHello)
artifacts=../.build-fuzz/artifacts
if [ -n "${FUZZ_BIN:-}" ]; then
  bin=$FUZZ_BIN
else
  bin=$(./build.sh .build-fuzz release | tail -1)
fi
for target in "${targets[@]}"; do
  [ -x "$bin/$target" ] || { echo "FAILED: $target (no $bin/$target)"; exit 1; }
done
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
    mkdir -p "$artifacts"
    cp "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$artifacts/" 2>/dev/null || true
    echo "the failing input is kept in .build-fuzz/artifacts/ (reproduce: $bin/$target FILE)"
    ls "$artifacts" | tail -3
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
