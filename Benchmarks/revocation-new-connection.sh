#!/usr/bin/env bash
# CPU microseconds per request of the proxy when every request needs a new
# upstream connection (the origin, `openssl s_server -www`, closes after each
# answer), for the same rule three ways: without revocation information,
# with CRL checking (the anchor set's CRLs and `crl: require`), and with a
# stapled OCSP response (`stapledOCSP: require`). Each variant runs its own
# proxy, once with resumed and once with full handshakes (an origin that
# refuses resumption). Medians of ROUNDS rounds of REQUESTS requests, and
# the ratio to the same rule without revocation.
#   Benchmarks/revocation-new-connection.sh [--rounds 3] [--requests 400] BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 requests=400
while [ $# -gt 1 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--rounds N] [--requests N] BINARY" >&2; exit 2; }
binary=$1
pki=$PWD/Tests/Fixtures/pki/revocation
work=$(mktemp -d)
origin_port=19655 proxy_port=13499
pids=()
trap 'kill ${pids[@]} 2>/dev/null; rm -rf "$work"' EXIT
serve() {  # PORT [s_server arguments …]
  local port=$1; shift
  openssl s_server -accept "127.0.0.1:$port" -cert "$pki/good.pem" -key "$pki/good.key" \
    -cert_chain "$pki/intermediate.pem" -www -quiet "$@" >/dev/null 2>&1 &
  pids+=($!)
}
serve $origin_port
serve $((origin_port + 1)) -status_file "$pki/ocsp-good.der"
serve $((origin_port + 2)) -no_cache -num_tickets 0
serve $((origin_port + 3)) -no_cache -num_tickets 0 -status_file "$pki/ocsp-good.der"
config() {  # VARIANT HANDSHAKES
  local port=$origin_port crls="" revocation="{}"
  case $1 in
    crl) crls="\"$pki/intermediate.crl\", \"$pki/root.crl\""; revocation="{crl: require}" ;;
    staple) port=$((origin_port + 1)); revocation="{stapledOCSP: require}" ;;
  esac
  [ "$2" = full ] && port=$((port + 2))
  cat > "$work/proxy.yaml" <<YAML
stateDirectory: "$work/state"
listeners:
  - {name: forward, address: "127.0.0.1:$proxy_port", mode: forward}
connectTo: ["good.revocation.test:443:127.0.0.1:$port"]
anchorSets:
  rev: {files: ["$pki/root.pem"], crls: [$crls]}
logging: {access: false, level: error}
defaults: {action: deny}
domains:
  - {domain: good.revocation.test, anchors: [rev], revocation: $revocation}
YAML
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A samples
for round in $(seq "$rounds"); do
  for handshakes in resumed full; do
    for variant in none crl staple; do
      config $variant $handshakes
      rm -f "$work/ready"
      "$binary" run --config "$work/proxy.yaml" --ready-file "$work/ready" 2>"$work/proxy.log" &
      proxy=$!
      for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
      [ -e "$work/ready" ] || { echo "pinproxy did not start: $(cat "$work/proxy.log")" >&2; exit 1; }
      curl -s -o /dev/null -x "http://127.0.0.1:$proxy_port" http://good.revocation.test/   # first verdict
      args=()
      for _ in $(seq "$requests"); do args+=(-o /dev/null "http://good.revocation.test/"); done
      before=$(ticks $proxy)
      ok=$(curl -s -x "http://127.0.0.1:$proxy_port" -w "%{http_code}\n" "${args[@]}" | grep -c '^200$' || true)
      after=$(ticks $proxy)
      kill $proxy; wait $proxy 2>/dev/null || true
      [ "$ok" -eq "$requests" ] || { echo "$variant/$handshakes: only $ok of $requests answered 200" >&2; exit 1; }
      samples[$variant/$handshakes]+="$(echo "($after - $before) * 1000000 / $hz / $requests" | bc -l | xargs printf "%.1f") "
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for handshakes in resumed full; do
  base=$(echo "${samples[none/$handshakes]}" | median)
  for variant in none crl staple; do
    value=$(echo "${samples[$variant/$handshakes]}" | median)
    printf '%-8s %-7s handshakes %7.1f µs CPU/request  ratio %.2f  (runs: %s)\n' "$variant" "$handshakes" "$value" \
      "$(echo "$value / $base" | bc -l)" "${samples[$variant/$handshakes]}"
  done
done
