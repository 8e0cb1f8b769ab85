# Sourced by the *-overhead.sh benchmarks: what one feature costs, as CPU
# microseconds per request of the default build against a build compiled
# without it (a -D flag), under one load of Benchmarks/compare, in the same
# run (medians of interleaved runs, so both see the same noise).
#
#   overhead LABEL DEFINE LOAD [--runs 5] [--duration 8]
#
# Builds two static release binaries (.build-static and .build-noLABEL,
# build folders git ignores), runs compare with both (as LABEL and
# noLABEL), and prints the ratio of the medians.
overhead() {
  local label=$1 define=$2 load=$3 runs=5 duration=8
  shift 3
  while (($#)); do
    case "$1" in
      --runs) runs="$2"; shift 2 ;;
      --duration) duration="$2"; shift 2 ;;
      *) echo "usage: $0 [--runs N] [--duration SECONDS]" >&2; exit 2 ;;
    esac
  done
  swift build -c release --product pinproxy --static-swift-stdlib --build-path .build-static >&2
  swift build -c release --product pinproxy --static-swift-stdlib --build-path ".build-no$label" \
    -Xswiftc "-D$define" >&2
  local out
  out=$(mktemp)
  Benchmarks/compare --runs "$runs" --duration "$duration" --loads "$load" --no-counts \
    --pinproxy "$label=.build-static/release/pinproxy" --pinproxy "no$label=.build-no$label/release/pinproxy" \
    --only "$label-forward,no$label-forward" | tee "$out"
  python3 - "$out" "$label" "$load" <<'PY'
import re, sys
text, label, load = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
match = re.search(rf"no{label}-forward / {label}-forward, {load}, cpu_us: ([0-9.]+)", text)
if not match:
    sys.exit(f"{label}-overhead: compare printed no ratio of the two builds")
ratio = 1 / float(match.group(1))
print(f"{label}-overhead: CPU per {load} request with {label} / without: {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")
PY
  rm -f "$out"
}
