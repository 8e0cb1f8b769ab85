#!/usr/bin/env bash
# Requests/s through pinproxy on this machine, on 127.0.0.1 only, bounded in
# time: an nginx TLS origin (keep-alive, 100-byte body), then wrk (-c32) straight
# at nginx over TLS, through a pinproxy forward listener (absolute-form, publicKey
# pin) and through a tunnel listener. Installs nginx and wrk if missing.
# Usage: Benchmarks/proxy-rps.sh [seconds per run, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
. Benchmarks/lib/tls-origin.sh
swift build -c release --product pinproxy >/dev/null
work=$(mktemp -d)
tls_origin "$work" 19443
proxy_config "$work" 13300 19443 \
  '  - {name: tunnel, address: "127.0.0.1:13301", mode: tunnel, upstream: "httpbin.org:443"}'
nginx -c "$work/nginx.conf"
.build/release/pinproxy run --config "$work/proxy.yaml" 2>"$work/proxy.log" &
proxy=$!
trap 'kill $proxy 2>/dev/null; nginx -c "$work/nginx.conf" -s stop >/dev/null 2>&1; rm -rf "$work"' EXIT
sleep 1
rps() {
  local out
  out=$(wrk_checked -t2 -c32 -d"${duration}s" "$@") || exit 1
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}
direct=$(rps https://127.0.0.1:19443/small)
forward=$(rps -s "$work/absolute.lua" http://127.0.0.1:13300)
tunnel=$(rps -H "Host: httpbin.org" http://127.0.0.1:13301/small)
printf '%-40s %12s %8s\n' "path" "req/s" "ratio"
printf '%-40s %12s %8s\n' "wrk -> nginx (TLS)" "$direct" "1.00"
printf '%-40s %12s %8.2f\n' "wrk -> pinproxy forward -> nginx (TLS)" "$forward" "$(echo "$forward / $direct" | bc -l)"
printf '%-40s %12s %8.2f\n' "wrk -> pinproxy tunnel -> nginx (TLS)" "$tunnel" "$(echo "$tunnel / $direct" | bc -l)"
printf 'pinproxy RSS after the runs: %s kB\n' "$(ps -o rss= -p $proxy)"
