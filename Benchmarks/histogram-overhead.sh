#!/usr/bin/env bash
# What the latency histograms cost: CPU microseconds per request of pinproxy
# with them (the default build) against a build without them
# (-D PINPROXY_NO_HISTOGRAMS makes every observation a no-op), under the
# keep-alive load of Benchmarks/compare, in the same run. The issue's goal:
# within 3 %.
#
#   Benchmarks/histogram-overhead.sh [--runs 5] [--duration 8]
#
# Run it on a quiet machine: no build or test running.
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/overhead.sh
overhead histograms PINPROXY_NO_HISTOGRAMS keep-alive "$@"
