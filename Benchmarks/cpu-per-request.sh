#!/usr/bin/env bash
# CPU microseconds per request of each given pinproxy binary (release builds)
# on the same job, measured in one run on 127.0.0.1: wrk -t1 -c32 keep-alive
# small GETs in absolute-form through a forward listener (publicKey pin) to
# an nginx TLS origin. The binaries alternate for ROUNDS rounds; medians and
# the ratio to the first binary are printed. Installs nginx and wrk if missing.
# A binary may carry ":loops=N" to run it with `eventLoops: N`, or
# ":access" to run it with the access log on (written to a file), or
# ":auth" to run it with proxyAuth (a bcrypt htpasswd file; every request
# carries Proxy-Authorization, verified once and then from the cache), so
# the same binary can be compared with itself; ":parent" sends every upstream
# connection through a Squid parent on loopback (a CONNECT tunnel per pooled
# connection; the request names the origin's port, which Squid reaches
# through its own hosts file), against the same binary direct.
#   Benchmarks/cpu-per-request.sh [--seconds 8] [--rounds 3] BINARY[:loops=N|:access|:auth|:parent] [BINARY ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=8 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--seconds N] [--rounds N] BINARY[:loops=N|:access|:auth] [BINARY ...]" >&2; exit 2; }
. Benchmarks/lib/tls-origin.sh
work=$(mktemp -d)
tls_origin "$work" 19444
proxy_config "$work" 13310 19444 "" "stateDirectory: \"$work/state\""
htpasswd -B -b -c "$work/users.htpasswd" bench 'bench password' 2>/dev/null
{ cat "$work/absolute.lua"
  printf 'wrk.headers["Proxy-Authorization"] = "Basic %s"\n' "$(printf 'bench:bench password' | base64)"
} > "$work/auth.lua"
sed 's|http://httpbin.org/small|http://httpbin.org:19444/small|' "$work/absolute.lua" > "$work/parent.lua"
nginx -c "$work/nginx.conf"
squid=""
trap 'nginx -c "$work/nginx.conf" -s stop >/dev/null 2>&1; [ -z "$squid" ] || { kill $squid; wait $squid; } 2>/dev/null; rm -rf "$work"' EXIT
# The parent for ":parent" runs, started once: Squid without authentication,
# httpbin.org in its hosts file, CONNECT to any port.
start_parent() {
  [ -z "$squid" ] || return 0
  command -v squid >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq squid-openssl; }
  mkdir -p "$work/squid" && chmod 777 "$work/squid" && chmod 755 "$work"
  echo "127.0.0.1 httpbin.org" > "$work/squid/hosts"
  printf '%s\n' "http_port 127.0.0.1:13311" "pid_filename $work/squid/squid.pid" "cache_log $work/squid/cache.log" \
    "access_log none" "cache deny all" "pinger_enable off" "shutdown_lifetime 0 seconds" \
    "hosts_file $work/squid/hosts" "http_access allow all" > "$work/squid/squid.conf"
  squid -N -f "$work/squid/squid.conf" & squid=$!
  until curl -so /dev/null http://127.0.0.1:13311/; do sleep 0.1; done
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A samples
for round in $(seq "$rounds"); do
  for binary in "$@"; do
    cp "$work/proxy.yaml" "$work/run.yaml"
    script=absolute.lua
    case "$binary" in
      *:loops=*) echo "eventLoops: ${binary##*:loops=}" >> "$work/run.yaml" ;;
      *:access) sed -i 's/^logging: {access: false}/logging: {access: true}/' "$work/run.yaml" ;;
      *:auth)
        sed -i "s|mode: forward}|mode: forward, proxyAuth: {htpasswd: \"$work/users.htpasswd\"}}|" "$work/run.yaml"
        script=auth.lua ;;
      *:parent)
        start_parent
        sed -i -e 's|mode: forward}|mode: forward, allowedConnectPorts: [443, 19444]}|' \
          -e 's|^defaults: {action: deny}|parentProxies: {corp: {url: "http://127.0.0.1:13311"}}\ndefaults: {action: deny, parentProxy: corp}|' \
          "$work/run.yaml"
        script=parent.lua ;;
    esac
    program=${binary%%:*}
    rm -f "$work/ready"
    "$program" run --config "$work/run.yaml" --ready-file "$work/ready" 2>"$work/proxy.log" &
    proxy=$!
    # Measured only once it serves (a fixed sleep raced a slow start).
    for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
    [ -e "$work/ready" ] || { echo "pinproxy did not start: $(cat "$work/proxy.log")" >&2; kill $proxy; exit 1; }
    wrk -t1 -c32 -d1s -s "$work/$script" http://127.0.0.1:13310 >/dev/null   # warm the pool
    before=$(ticks $proxy)
    out=$(wrk_checked -t1 -c32 -d"${seconds}s" -s "$work/$script" http://127.0.0.1:13310) || exit 1
    requests=$(echo "$out" | awk '/requests in/ {print $1}')
    after=$(ticks $proxy)
    kill $proxy; wait $proxy 2>/dev/null || true
    samples[$binary]+="$(printf "%.1f" "$(echo "($after - $before) * 1000000 / $hz / $requests" | bc -l)") "
  done
done
first=""
for binary in "$@"; do
  median=$(echo "${samples[$binary]}" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  [ -n "$first" ] || first=$median
  printf '%-60s %8.1f µs CPU/request (runs: %s) ratio %.2f\n' "$binary" "$median" "${samples[$binary]}" \
    "$(echo "$median / $first" | bc -l)"
done
