#!/usr/bin/env bash
# The allocation guard: a warm keep-alive request through the forward
# listener makes no heap allocation outside OpenSSL. A count, not a time.
#
# Starts the pinproxy given (a release build: an -Onone build allocates in
# unspecialised generic code and says nothing of the shipped binary) with
# Benchmarks/lib/malloc-count.c preloaded, in front of the benchmarks' TLS
# origin; warms one keep-alive client connection, then counts every
# allocation during three rounds of 5000 more requests on it (the quietest
# round counts), and how many of them OpenSSL made (CRYPTO_malloc: its record buffers, released between records as
# nginx configures them too). What is left is ours: the loop, the parsers,
# the machines, the pool, the access to the budget — and must be nothing.
# Then counts six idle seconds: a daemon with nothing to do allocates
# nothing either.
#
# Usage: Benchmarks/allocations.sh PINPROXY_BINARY
# Prints the counts and exits 1 when the path allocates.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "$1")
. Benchmarks/lib/tls-origin.sh
work=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
origin=$(port)
listen=$(port)
proxy=""
cleanup() {
  [ -n "$proxy" ] && kill "$proxy" 2>/dev/null && wait "$proxy" 2>/dev/null
  nginx -c "$work/nginx.conf" -s stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
tls_origin "$work" "$origin"
proxy_config "$work" "$listen" "$origin" "" "stateDirectory: \"$work/state\""
nginx -c "$work/nginx.conf"
gcc -O2 -shared -fPIC -o "$work/malloc-count.so" Benchmarks/lib/malloc-count.c
MALLOC_COUNT_FILE="$work/counts" LD_PRELOAD="$work/malloc-count.so" \
  "$binary" run --config "$work/proxy.yaml" --ready-file "$work/ready" 2>"$work/proxy.log" &
proxy=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
[ -e "$work/ready" ] || { echo "allocations: pinproxy did not start" >&2; cat "$work/proxy.log" >&2; exit 1; }
[ -s "$work/counts" ] || { echo "allocations: the malloc counter did not load" >&2; exit 1; }

# One client connection, kept open across both readings of the counter, so
# that only requests are counted: not the connection's set-up or close.
python3 - "$listen" "$work/counts" "$work/state/served-chains.json" <<'PY'
import socket, struct, sys, time
port, counts, served = int(sys.argv[1]), sys.argv[2], sys.argv[3]
request = b"GET http://httpbin.org/small HTTP/1.1\r\nHost: httpbin.org\r\n\r\n"
client = socket.create_connection(("127.0.0.1", port))
client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
pending = b""

def exchange():
    global pending
    client.sendall(request)
    while b"\r\n\r\n" not in pending:
        pending += client.recv(65536)
    head, _, rest = pending.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"allocations: the proxy answered {head[:60]!r}")
    length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")][0])
    while len(rest) < length:
        rest += client.recv(65536)
    pending = rest[length:]

def read():
    with open(counts, "rb") as f:
        return struct.unpack("<QQ", f.read(16))

# Warm: the pool holds the upstream connection, every buffer has grown.
for _ in range(500):
    exchange()
# Three rounds of 5000; the quietest counts. Work that is not a request's
# (the loop's threads, a timer) allocates now and then whatever the load —
# 1 to 20 times in a round here, once 79 on a busy machine — while one
# allocation per request is 5000 in every round.
requests = 5000
rounds = []
for _ in range(3):
    before = read()
    started = time.monotonic()
    for _ in range(requests):
        exchange()
    after = read()
    total, openssl = after[0] - before[0], after[1] - before[1]
    rounds.append((total - openssl, openssl, time.monotonic() - started))
ours, openssl, elapsed = min(rounds)
print(f"allocations: {requests} keep-alive requests in {elapsed:.1f} s: {ours} allocations outside OpenSSL"
      f" ({ours / requests:.4f} per request; rounds {[r[0] for r in rounds]}),"
      f" {openssl / requests:.2f} per request in OpenSSL")
# Fewer than one in a hundred requests, in the quietest round.
if ours * 100 >= requests:
    sys.exit("allocations: the keep-alive request path allocates outside OpenSSL")

# Idle: the client connection open, nothing asked. First the chain the
# rule accepted is written to served-chains.json (real work, once); then
# six seconds, long enough for the background ticks to run (the CT
# sightings stat every 2 s, the served-chain recorder every 5 s, neither
# with anything to do): an idle daemon allocates nothing of its own. A few
# are let through: libdispatch allocates a timer configuration each time a
# loop's timer is re-armed for a deadline that moved (two in this window),
# and may grow or retire a worker thread.
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    try:
        if b'"chain"' in open(served, "rb").read():
            break
    except OSError:
        pass
    time.sleep(0.2)
else:
    sys.exit("allocations: the served chain was not written within 15 s")
before = read()
time.sleep(6)
after = read()
idle = after[0] - before[0]
print(f"allocations: idle for 6 s: {idle} allocations")
if idle > 4:
    sys.exit("allocations: the idle daemon allocates (a background tick that found nothing to do)")
PY
