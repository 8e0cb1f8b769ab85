#!/usr/bin/env bash
# What the latency histograms cost: CPU microseconds per request of pinproxy
# with them (the default build) against a build without them
# (-D PINPROXY_NO_HISTOGRAMS makes every observation a no-op), under the
# keep-alive load of Benchmarks/compare, in the same run. The issue's goal:
# within 3 %.
#
#   Benchmarks/histogram-overhead.sh [--runs 5] [--duration 8]
#
# Builds two static release binaries (.build-static, .build-nohist; both are
# build folders git ignores), then runs Benchmarks/compare with both and
# nginx as the reference, keep-alive load only, and prints the ratio of the
# medians. Run it on a quiet machine: no build or test running.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5
duration=8
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--duration SECONDS]" >&2; exit 2 ;;
  esac
done
swift build -c release --product pinproxy --static-swift-stdlib --build-path .build-static >&2
swift build -c release --product pinproxy --static-swift-stdlib --build-path .build-nohist \
  -Xswiftc -DPINPROXY_NO_HISTOGRAMS >&2
with=.build-static/release/pinproxy
without=.build-nohist/release/pinproxy
out=$(mktemp)
trap 'rm -f "$out"' EXIT
Benchmarks/compare --runs "$runs" --duration "$duration" --loads keep-alive --no-counts \
  --pinproxy "histograms=$with" --pinproxy "nohistograms=$without" \
  --only histograms-forward,nohistograms-forward | tee "$out"
# compare's own line: the median of the per-run ratios (same run, same noise).
python3 - "$out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
match = re.search(r"nohistograms-forward / histograms-forward, keep-alive, cpu_us: ([0-9.]+)", text)
if not match:
    sys.exit("histogram-overhead: compare printed no ratio of the two builds")
ratio = 1 / float(match.group(1))
print(f"histogram-overhead: CPU per keep-alive request with histograms / without: {ratio:.3f} "
      f"({(ratio - 1) * 100:+.1f} %; goal: within 3 %)")
EOF
