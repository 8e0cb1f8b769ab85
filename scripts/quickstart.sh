#!/usr/bin/env bash
# Offline demo of the proxy: a local TLS origin (openssl s_server) plays the
# bank; pinproxy runs config/quickstart.yaml; curl sends one request that the
# policy allows and one it refuses. Uses ports 3128 and 9443 on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PINPROXY:-.build/release/pinproxy}
[ -x "$bin" ] || swift build -c release --product pinproxy
examples=$PWD/config/examples
work=$(mktemp -d)
(cd "$examples" && exec openssl s_server -accept 127.0.0.1:9443 -cert api.bank.example.pem \
  -cert_chain intermediate.pem -key api.bank.example.key -WWW -quiet) >/dev/null 2>&1 &
origin=$!
"$bin" run --config config/quickstart.yaml --ready-file "$work/ready" 2>"$work/proxy.log" &
proxy=$!
trap 'kill $origin $proxy 2>/dev/null || true; rm -rf "$work"' EXIT
# The proxy writes the ready file once it serves; the origin is up once it accepts.
while [ ! -e "$work/ready" ]; do
  kill -0 $proxy 2>/dev/null || { cat "$work/proxy.log" >&2; exit 1; }
  sleep 0.1
done
until (: </dev/tcp/127.0.0.1/9443) 2>/dev/null; do
  kill -0 $origin 2>/dev/null || { echo "openssl s_server did not start (is 9443 taken?)" >&2; exit 1; }
  sleep 0.1
done
echo "\$ curl -x http://127.0.0.1:3128 http://api.bank.example/hello.txt"
curl -s -i -x http://127.0.0.1:3128 http://api.bank.example/hello.txt | grep -v -i '^date:'
echo
echo "\$ curl -x http://127.0.0.1:3128 http://pay.bank.example/hello.txt"
curl -s -i -x http://127.0.0.1:3128 http://pay.bank.example/hello.txt
echo
echo "proxy log:"
grep -E "refused" "$work/proxy.log" | cut -c1-300
