#!/usr/bin/env bash
# CPU microseconds per request of the proxy when every request needs a new
# upstream connection (the origin, `openssl s_server -www`, closes after each
# answer), for a rule with requiresCertificateTransparency (a full handshake
# each time, SCTs from the TLS extension validated and counted) beside a rule
# without it whose origin refuses resumption (full handshakes too: the
# difference is the CT work) and one whose origin resumes (what a rule
# without CT usually gets). Medians of ROUNDS rounds of REQUESTS requests.
#   Benchmarks/ct-new-connection.sh [--rounds 3] [--requests 400] BINARY
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
pki=$PWD/Tests/Fixtures/pki
work=$(mktemp -d)
python3 - "$work" "$pki" <<'PY'
import base64, struct, sys
work, pki = sys.argv[1], sys.argv[2]
scts = [open(f"{pki}/ct/httpbin-{name}.sct", "rb").read() for name in ("a", "b")]
body = b"".join(struct.pack(">H", len(s)) + s for s in scts)
sct_list = struct.pack(">H", len(body)) + body
# Context 0x1180: ClientHello, TLS 1.2 ServerHello, TLS 1.3 Certificate.
info = bytes([0, 0, 0x11, 0x80]) + struct.pack(">HH", 18, len(sct_list)) + sct_list
with open(f"{work}/serverinfo.pem", "w") as f:
    f.write("-----BEGIN SERVERINFOV2 FOR CT-----\n" + base64.encodebytes(info).decode()
            + "-----END SERVERINFOV2 FOR CT-----\n")
PY
origin_port=19555 proxy_port=13399
openssl s_server -accept 127.0.0.1:$origin_port -cert "$pki/httpbin.pem" -key "$pki/httpbin.key" \
  -cert_chain "$pki/int-a.pem" -www -quiet -serverinfo "$work/serverinfo.pem" >/dev/null 2>&1 &
origin=$!
openssl s_server -accept 127.0.0.1:$((origin_port + 1)) -cert "$pki/httpbin.pem" -key "$pki/httpbin.key" \
  -cert_chain "$pki/int-a.pem" -www -quiet -no_cache -num_tickets 0 >/dev/null 2>&1 &
full_origin=$!
cat > "$work/proxy.yaml" <<YAML
listeners:
  - {name: forward, address: "127.0.0.1:$proxy_port", mode: forward}
connectTo: ["ct.httpbin.org:443:127.0.0.1:$origin_port", "plain.httpbin.org:443:127.0.0.1:$origin_port",
  "full.httpbin.org:443:127.0.0.1:$((origin_port + 1))"]
anchorSets:
  test: {files: ["$pki/root-a.pem"]}
certificateTransparency: {logList: "$pki/ct/log-list.json"}
logging: {access: false, level: error}
domains:
  - {domain: ct.httpbin.org, anchors: [test], requiresCertificateTransparency: true}
  - {domain: plain.httpbin.org, anchors: [test]}
  - {domain: full.httpbin.org, anchors: [test]}
YAML
"$binary" run --config "$work/proxy.yaml" 2>"$work/proxy.log" &
proxy=$!
trap 'kill $proxy $origin $full_origin 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A samples
for round in $(seq "$rounds"); do
  for host in plain full ct; do
    args=()
    for _ in $(seq "$requests"); do args+=(-o /dev/null "http://$host.httpbin.org/"); done
    before=$(ticks $proxy)
    ok=$(curl -s -x "http://127.0.0.1:$proxy_port" -w "%{http_code}\n" "${args[@]}" | grep -c '^200$' || true)
    after=$(ticks $proxy)
    [ "$ok" -eq "$requests" ] || { echo "$host: only $ok of $requests answered 200" >&2; exit 1; }
    samples[$host]+="$(( (after - before) * 1000000 / hz / requests )) "
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=$(echo "${samples[plain]}" | median)
full=$(echo "${samples[full]}" | median)
ct=$(echo "${samples[ct]}" | median)
echo "no CT, resumed handshakes        $plain µs CPU/request (runs: ${samples[plain]})"
echo "no CT, full handshakes           $full µs CPU/request (runs: ${samples[full]})"
echo "requiresCertificateTransparency  $ct µs CPU/request (runs: ${samples[ct]}) ratio to full $(awk "BEGIN {printf \"%.2f\", $ct / $full}")"
