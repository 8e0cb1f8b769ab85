#!/usr/bin/env bash
# Upstream HTTP/2 against HTTP/1.1, one pinproxy binary, same run: wrk -t1
# -c50 keep-alive small GETs (absolute-form, 50 client connections) through a
# forward listener to an nginx TLS origin that speaks h2 and http/1.1. The
# rule alternates between `upstreamHTTP2: true` and `false` for ROUNDS rounds.
# Prints medians of requests/s, CPU µs per request of pinproxy and of nginx,
# and the upstream TCP connections pinproxy opened (nginx stub_status
# `accepts`, read before and after each run).
#   Benchmarks/upstream-http2.sh [--seconds 6] [--rounds 3] [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=6 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) break ;;
  esac
done
binary=${1:-.build/release/pinproxy}
. Benchmarks/lib/tls-origin.sh
work=$(mktemp -d)
tls_origin "$work" 19445
# The same origin, with HTTP/2 and stub_status.
sed -i 's|listen 127.0.0.1:19445 ssl;|listen 127.0.0.1:19445 ssl http2;\n    location /status { stub_status; }\n    http2_max_concurrent_streams 128;|' "$work/nginx.conf"
proxy_config "$work" 13311 19445 "" "stateDirectory: \"$work/state\""
nginx -c "$work/nginx.conf"
trap 'nginx -c "$work/nginx.conf" -s stop >/dev/null 2>&1; rm -rf "$work"' EXIT
sleep 0.5
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
worker=$(pgrep -P "$(cat "$work/nginx.pid")" | head -1)
accepts() {
  curl -s --http1.1 --cacert "$pki/root-a.pem" --resolve "httpbin.org:19445:127.0.0.1" \
    https://httpbin.org:19445/status | awk 'NR == 3 {print $1}'
}
declare -A rps proxycpu origincpu conns
for round in $(seq "$rounds"); do
  for mode in true false; do
    sed "s|pinnedCertificates: \[$pki/int-a.pem\]}|pinnedCertificates: [$pki/int-a.pem], upstreamHTTP2: $mode}|" \
      "$work/proxy.yaml" > "$work/run.yaml"
    grep -q "upstreamHTTP2: $mode" "$work/run.yaml" || { echo "could not set upstreamHTTP2" >&2; exit 1; }
    "$binary" run --config "$work/run.yaml" 2>"$work/proxy.log" &
    proxy=$!
    sleep 1
    opened=$(accepts)
    before=$(ticks $proxy) nbefore=$(ticks "$worker")
    out=$(wrk_checked -t1 -c50 -d"${seconds}s" -s "$work/absolute.lua" http://127.0.0.1:13311) || exit 1
    after=$(ticks $proxy) nafter=$(ticks "$worker")
    # Less the two stub_status requests themselves.
    conns[$mode]+="$(( $(accepts) - opened - 1 )) "
    kill $proxy; wait $proxy 2>/dev/null || true
    requests=$(echo "$out" | awk '/requests in/ {print $1}')
    rps[$mode]+="$(echo "$out" | awk '/Requests\/sec/ {printf "%.0f", $2}') "
    proxycpu[$mode]+="$(printf "%.1f" "$(echo "($after - $before) * 1000000 / $hz / $requests" | bc -l)") "
    origincpu[$mode]+="$(printf "%.1f" "$(echo "($nafter - $nbefore) * 1000000 / $hz / $requests" | bc -l)") "
  done
done
median() { echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for mode in true false; do
  label=$([ $mode = true ] && echo "upstream h2      " || echo "upstream http/1.1")
  printf '%s  %7s req/s  pinproxy %6s µs CPU/req  nginx %6s µs CPU/req  upstream connections %s  (runs: conns %s)\n' \
    "$label" "$(median "${rps[$mode]}")" "$(median "${proxycpu[$mode]}")" "$(median "${origincpu[$mode]}")" \
    "$(median "${conns[$mode]}")" "${conns[$mode]}"
done
