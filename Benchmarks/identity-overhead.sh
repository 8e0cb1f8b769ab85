#!/usr/bin/env bash
# What knowing local clients costs at accept: CPU microseconds per request
# under Benchmarks/compare's new-connection load (one connection per
# request, every client on 127.0.0.1, so every accept asks the kernel for
# the client socket's owner with one sock_diag request), against a build
# that does not ask (-D PINPROXY_NO_PEER_IDENTITY: every peer is remote).
#
#   Benchmarks/identity-overhead.sh [--runs 5] [--duration 8]
#
# Run it on a quiet machine: no build or test running.
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib/overhead.sh
overhead identity PINPROXY_NO_PEER_IDENTITY new-connection "$@"
